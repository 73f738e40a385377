//! `x-kubernetes-validations`: the CEL rules of a custom resource's schema, evaluated as
//! kube-apiserver evaluates them, through the `cel` crate.
//!
//! Each rule of a schema node is evaluated with `self` bound to the value at that node (and,
//! on an update, `oldSelf` to the value it had, matched by property name, map key, or — for
//! items of `x-kubernetes-list-type: map` lists — the list's map keys; a rule that reads
//! `oldSelf` — a transition rule — is evaluated only when there is one). A rule that
//! is false is a cause worded as kube-apiserver words it: `<path>: Invalid value: "<type>":
//! <message>`, with the rule's `message` (or `failed rule: <rule>`), its `reason` and
//! `fieldPath`; an error while evaluating it (a key the object lacks, values that do not
//! compare) is refused the same way, as kube-apiserver refuses it. A rule this evaluator cannot
//! run — syntax or a function of Kubernetes' CEL libraries it lacks (`isURL`, `quantity`, …) —
//! is logged and let through: kube-apiserver would have checked it when the CRD was created,
//! and refusing objects it accepts would break them. Integers are CEL `int`s, numbers with a
//! fraction `double`s.

use std::collections::HashMap;
use std::sync::Arc;

use cel::{Context, ExecutionError, Program};
use serde_json::Value;

use crate::error::Cause;

/// What the CEL rules of `schema` refuse in `obj` (an update's previous object is `old`).
#[must_use]
pub fn validate(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    rules_at(schema, obj, old, "", &mut causes);
    causes
}

/// The rules of `schema` (a CRD version's `openAPIV3Schema`, at field path `at`) that do not
/// compile, refused as kube-apiserver refuses them when the CRD is written: a rule that cannot
/// even be parsed would refuse or pass every object for no reason the user wrote.
#[must_use]
pub fn compile_errors(schema: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    compile_at(schema, at, None, &mut causes);
    causes
}

/// `uncorrelatable`: where the first list above that is not a `x-kubernetes-list-type: map`
/// list has its items — below it, a value has no previous one to compare with, so a transition
/// rule (`oldSelf`) may not stand there.
fn compile_at(schema: &Value, at: &str, uncorrelatable: Option<&str>, causes: &mut Vec<Cause>) {
    let rules = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (i, rule) in rules.iter().enumerate() {
        let field = format!("{at}.x-kubernetes-validations[{i}].rule");
        match rule.get("rule").and_then(Value::as_str) {
            None | Some("") => causes.push(Cause::required(field)),
            Some(source) => match Program::compile(source) {
                Ok(program) if program.references().has_variable("oldSelf") => {
                    if let Some(within) = uncorrelatable {
                        causes.push(Cause::invalid(
                            field,
                            source,
                            format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"),
                        ));
                    }
                }
                Ok(_) => {}
                // Syntax Kubernetes' CEL has and this parser lacks (optionals: `.?`, `[?`):
                // kube-apiserver accepts the rule, so it is let through (and not enforced).
                Err(e) if e.to_string().contains("unsupported syntax") => {}
                Err(e) => {
                    causes.push(Cause::invalid(
                        field,
                        source,
                        format!("compilation failed: {e}"),
                    ));
                }
            },
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, s) in props {
            compile_at(s, &format!("{at}.properties[{k}]"), uncorrelatable, causes);
        }
    }
    if let Some(s) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        compile_at(
            s,
            &format!("{at}.additionalProperties"),
            uncorrelatable,
            causes,
        );
    }
    if let Some(s) = schema.get("items") {
        let items_at = format!("{at}.items");
        let map_list = schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
        let uncorrelatable = uncorrelatable.or((!map_list).then_some(items_at.as_str()));
        compile_at(s, &items_at, uncorrelatable, causes);
    }
}

/// Evaluates the rules of `schema` on `v`, then those below it.
fn rules_at(schema: &Value, v: &Value, old: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for rule in rules {
            if let Some(cause) = check(rule, schema, v, old, path) {
                causes.push(cause);
            }
        }
    }
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, x) in map {
                if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(s) = props.and_then(|p| p.get(k)).or(additional) {
                    let was = old.and_then(|o| o.get(k));
                    rules_at(s, x, was, &join(path, k), causes);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                let old_items = old.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                for (i, x) in items.iter().enumerate() {
                    let was = previous_item(schema, x, old_items);
                    rules_at(item, x, was, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

/// The previous value of a list item, correlated as kube-apiserver correlates them: in a
/// `x-kubernetes-list-type: map` list, the old item with the same values of the list's map keys.
/// Items of other lists (`atomic`, `set`) have none, so their transition rules are not
/// evaluated (a CRD with one is refused, see [`compile_errors`]).
fn previous_item<'o>(
    list_schema: &Value,
    item: &Value,
    old_items: &'o [Value],
) -> Option<&'o Value> {
    match list_schema
        .get("x-kubernetes-list-type")
        .and_then(Value::as_str)
    {
        Some("map") => {
            let keys = list_schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)?;
            let key_of = |v: &Value| -> Vec<Option<Value>> {
                keys.iter()
                    .filter_map(Value::as_str)
                    .map(|k| v.get(k).cloned())
                    .collect()
            };
            let wanted = key_of(item);
            old_items.iter().find(|o| key_of(o) == wanted)
        }
        _ => None,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// One rule on `v`: the cause it gives, if it is false (or broken).
fn check(
    rule: &Value,
    schema: &Value,
    v: &Value,
    old: Option<&Value>,
    path: &str,
) -> Option<Cause> {
    let source = rule.get("rule").and_then(Value::as_str)?;
    let program = match Program::compile(source) {
        Ok(p) => p,
        Err(e) => return unsupported(path, source, &e.to_string()),
    };
    let transition = program.references().has_variable("oldSelf");
    if transition && old.is_none() {
        return None;
    }
    let mut context = Context::default();
    context.add_variable_from_value("self", to_cel(&self_of(v, path)));
    if let Some(old) = old {
        context.add_variable_from_value("oldSelf", to_cel(&self_of(old, path)));
    }
    match program.execute(&context) {
        Ok(cel::Value::Bool(true)) => None,
        Ok(cel::Value::Bool(false)) => Some(refused(rule, schema, path, source)),
        Ok(other) => Some(broken(
            path,
            schema,
            source,
            &format!("the rule gave {other:?}, not a bool"),
        )),
        Err(
            e @ (ExecutionError::UndeclaredReference(_)
            | ExecutionError::NotSupportedAsMethod { .. }
            | ExecutionError::NoSuchOverload(_)),
        ) => unsupported(path, source, &e.to_string()),
        Err(e) => Some(broken(path, schema, source, &e.to_string())),
    }
}

/// A rule this evaluator cannot run: let through, and said so in the log.
fn unsupported(path: &str, source: &str, error: &str) -> Option<Cause> {
    tracing::warn!(field = path, rule = source, %error, "a CEL rule of the schema cannot be evaluated here; not enforced");
    None
}

/// What `self` is at the root: the object without what the API server manages, as
/// kube-apiserver binds it (`apiVersion`, `kind`, and of `metadata` only `name` and
/// `generateName`).
fn self_of(v: &Value, path: &str) -> Value {
    let Some(map) = v.as_object().filter(|_| path.is_empty()) else {
        return v.clone();
    };
    let mut map = map.clone();
    if let Some(meta) = map.get("metadata").and_then(Value::as_object) {
        let kept: serde_json::Map<String, Value> = meta
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "name" | "generateName"))
            .map(|(k, x)| (k.clone(), x.clone()))
            .collect();
        map.insert("metadata".into(), Value::Object(kept));
    }
    Value::Object(map)
}

/// A false rule, as kube-apiserver reports it.
fn refused(rule: &Value, schema: &Value, path: &str, source: &str) -> Cause {
    let message = rule
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map_or_else(|| format!("failed rule: {source}"), str::to_string);
    let field = rule
        .get("fieldPath")
        .and_then(Value::as_str)
        .map_or_else(|| path.to_string(), |f| format!("{path}{f}"));
    let (reason, wording) = match rule.get("reason").and_then(Value::as_str) {
        Some("FieldValueForbidden") => ("FieldValueForbidden", "Forbidden".to_string()),
        Some("FieldValueRequired") => ("FieldValueRequired", "Required value".to_string()),
        Some("FieldValueDuplicate") => ("FieldValueDuplicate", "Duplicate value".to_string()),
        _ => (
            "FieldValueInvalid",
            format!("Invalid value: \"{}\"", type_name(schema)),
        ),
    };
    Cause {
        reason,
        field: field.trim_start_matches('.').to_string(),
        message: format!("{wording}: {message}"),
    }
}

/// A rule whose evaluation failed on this object: refused, as kube-apiserver refuses it.
fn broken(path: &str, schema: &Value, source: &str, error: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: path.to_string(),
        message: format!(
            "Invalid value: \"{}\": rule {source:?} failed: {error}",
            type_name(schema)
        ),
    }
}

fn type_name(schema: &Value) -> &str {
    schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("object")
}

/// `v` as a CEL value: integers are `int`s, other numbers `double`s.
fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => n.as_i64().map_or_else(
            || cel::Value::Float(n.as_f64().unwrap_or(0.0)),
            cel::Value::Int,
        ),
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let entries: HashMap<String, cel::Value> =
                map.iter().map(|(k, x)| (k.clone(), to_cel(x))).collect();
            cel::Value::from(entries)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_rule_that_does_not_compile_is_named_with_its_place() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.?a.orValue(2) > 1"}, {"rule": "self.a >"}],
            "properties": {"items": {"type": "array", "items": {"type": "string",
                "x-kubernetes-validations": [{"rule": "self.isURL()"}, {"rule": ""}]}}}}}});
        let causes = compile_errors(&schema, "spec.validation.openAPIV3Schema");
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule",
                "spec.validation.openAPIV3Schema.properties[spec].properties[items].items.x-kubernetes-validations[1].rule",
            ]
        );
        assert!(
            causes[0].message.contains("compilation failed"),
            "{}",
            causes[0].message
        );
        assert_eq!(causes[1].reason, "FieldValueRequired");
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas"},
                {"rule": "self.name.startsWith('web-')"},
                {"rule": "self.size == oldSelf.size", "message": "size is immutable", "reason": "FieldValueForbidden", "fieldPath": ".size"},
            ],
            "properties": {
                "minReplicas": {"type": "integer"},
                "maxReplicas": {"type": "integer"},
                "name": {"type": "string"},
                "size": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self.matches('^[a-z]+$')", "message": "lowercase"}]}},
            },
        }}})
    }

    fn spec(min: i64, max: i64, name: &str, size: f64) -> Value {
        json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w", "uid": "u"},
               "spec": {"minReplicas": min, "maxReplicas": max, "name": name, "size": size, "tags": ["ok"]}})
    }

    #[test]
    fn a_false_rule_is_refused_as_kube_apiserver_words_it() {
        assert!(validate(&schema(), &spec(1, 3, "web-a", 1.5), None).is_empty());
        let causes = validate(&schema(), &spec(5, 3, "api", 1.5), None);
        let messages: Vec<String> = causes
            .iter()
            .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
            .collect();
        assert_eq!(
            messages,
            [
                "FieldValueInvalid spec: Invalid value: \"object\": minReplicas must not exceed maxReplicas",
                "FieldValueInvalid spec: Invalid value: \"object\": failed rule: self.name.startsWith('web-')",
            ]
        );
    }

    #[test]
    fn a_transition_rule_reads_the_previous_value_and_only_on_update() {
        let old = spec(1, 3, "web-a", 1.5);
        assert!(validate(&schema(), &spec(1, 3, "web-a", 2.5), None).is_empty());
        let causes = validate(&schema(), &spec(1, 3, "web-a", 2.5), Some(&old));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].reason, "FieldValueForbidden");
        assert_eq!(causes[0].field, "spec.size");
        assert_eq!(causes[0].message, "Forbidden: size is immutable");
    }

    #[test]
    fn rules_apply_to_each_item_and_only_a_rule_that_fails_on_the_object_is_refused() {
        let mut obj = spec(1, 3, "web-a", 1.5);
        obj["spec"]["tags"] = json!(["ok", "Not-OK"]);
        let causes = validate(&schema(), &obj, None);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.tags[1]");
        assert_eq!(causes[0].message, "Invalid value: \"string\": lowercase");
        let missing =
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.b > 0"}]});
        let causes = validate(&missing, &json!({"a": 1}), None);
        assert_eq!(causes.len(), 1, "a key the object lacks is an error");
        assert!(causes[0].message.contains("No such key: b"), "{causes:?}");
        for unknown in [
            "self.((",
            "self.a.isURL()",
            "quantity('1Gi').isGreaterThan(quantity('1'))",
        ] {
            let rules = json!({"type": "object", "x-kubernetes-validations": [{"rule": unknown}]});
            assert!(
                validate(&rules, &json!({"a": "x"}), None).is_empty(),
                "{unknown}: not enforced here"
            );
        }
    }

    #[test]
    fn a_transition_rule_on_list_items_reads_the_item_with_the_same_map_keys() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "pools": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "x-kubernetes-validations": [
                    {"rule": "self.size >= oldSelf.size", "message": "a pool never shrinks"}],
                    "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}}},
            "plain": {"type": "array",
                "items": {"type": "object", "x-kubernetes-validations": [
                    {"rule": "self.size >= oldSelf.size", "message": "never evaluated"}],
                    "properties": {"size": {"type": "integer"}}}},
        }}}});
        let obj = |pools: Value, plain: Value| {
            json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "w"},
                   "spec": {"pools": pools, "plain": plain}})
        };
        let old = obj(
            json!([{"name": "a", "size": 3}, {"name": "b", "size": 5}]),
            json!([{"size": 9}]),
        );
        // Reordered, one grown, one new: nothing shrank.
        let grown = obj(
            json!([{"name": "c", "size": 1}, {"name": "b", "size": 6}, {"name": "a", "size": 3}]),
            json!([{"size": 1}]),
        );
        assert!(validate(&schema, &grown, Some(&old)).is_empty());
        let shrunk = obj(
            json!([{"name": "b", "size": 5}, {"name": "a", "size": 2}]),
            json!([]),
        );
        let causes = validate(&schema, &shrunk, Some(&old));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.pools[1]");
        assert_eq!(
            causes[0].message,
            "Invalid value: \"object\": a pool never shrinks"
        );

        // The rule on the plain list's items can never run: the CRD is refused.
        let causes = compile_errors(&schema, "spec.validation.openAPIV3Schema");
        assert_eq!(causes.len(), 1, "{causes:?}");
        let plain = "spec.validation.openAPIV3Schema.properties[spec].properties[plain].items";
        assert_eq!(
            causes[0].field,
            format!("{plain}.x-kubernetes-validations[0].rule")
        );
        assert!(
            causes[0].message.ends_with(&format!(
                "oldSelf cannot be used on the uncorrelatable portion of the schema within {plain}"
            )),
            "{}",
            causes[0].message
        );
    }

    #[test]
    fn the_root_sees_only_name_and_generate_name_of_metadata() {
        let root = json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.metadata.name == 'w' && !has(self.metadata.uid)"}]});
        assert!(validate(&root, &spec(1, 3, "web-a", 1.5), None).is_empty());
    }
}
