//! kube-apiserver's defaults for the built-in kinds: the API server fills them in ([`fill`]),
//! and the mirror leaves out of Git the ones people did not write ([`omit`]).
//!
//! The rules ([`rules`] for built-in kinds, [`schema`] for a custom resource's structural
//! schema) are written once, as a walk over an object that names each field a default can set.
//! Filling sets each absent one. Omitting finds each present one (a *site*) with the value its
//! default would have had, removes — deepest first — the sites that hold that value and Git's
//! document does not hold, fills the result again and puts back every site whose refilled value
//! differs from the live one (then takes out again each put back that only depended on
//! another), so that filling what Git gets gives back the live object exactly; if it would not
//! (an object stored before its defaults existed, a cluster that defaults differently), nothing
//! is omitted.

mod rules;
mod schema;

use serde_json::{Map, Value};

/// One step of a path into an object.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Where in an object a default can be, from its root.
type FieldPath = Vec<Step>;

/// A walk over an object's defaulted fields, filling them or finding them.
struct Walk {
    finding: bool,
    at: FieldPath,
    /// Found: each present defaulted field and the value its default would have been.
    sites: Vec<(FieldPath, Value)>,
}

impl Walk {
    fn new(finding: bool) -> Self {
        Self {
            finding,
            at: Vec::new(),
            sites: Vec::new(),
        }
    }

    /// Whether this walk finds sites (rather than filling): conditions that depend on a field
    /// having been absent before it was filled hold for every site found, since the check that
    /// follows keeps only the omissions a fill undoes exactly.
    fn finding(&self) -> bool {
        self.finding
    }

    /// A field with a default: set when absent (filling), recorded when present (finding).
    fn field(&mut self, map: &mut Map<String, Value>, key: &str, default: impl FnOnce() -> Value) {
        if self.finding {
            if map.contains_key(key) {
                let mut site = self.at.clone();
                site.push(Step::Key(key.to_string()));
                self.sites.push((site, default()));
            }
        } else if !map.contains_key(key) {
            map.insert(key.to_string(), default());
        }
    }

    /// Takes out a field whose value counts as unset (`targetPort: 0`, `labels: {}`) before
    /// filling it; finding changes nothing.
    fn clear(&mut self, map: &mut Map<String, Value>, key: &str) {
        if !self.finding {
            map.remove(key);
        }
    }

    /// A field whose default is an empty object, walked into: set to `{}` when absent
    /// (filling), then `f` defaults its fields.
    fn defaulted_object(
        &mut self,
        map: &mut Map<String, Value>,
        key: &str,
        f: impl FnOnce(&mut Self, &mut Map<String, Value>),
    ) {
        self.field(map, key, || Value::Object(Map::new()));
        self.object(map, key, f);
    }

    /// Walks into the object under `key`, if there is one.
    fn object(
        &mut self,
        map: &mut Map<String, Value>,
        key: &str,
        f: impl FnOnce(&mut Self, &mut Map<String, Value>),
    ) {
        if let Some(Value::Object(child)) = map.get_mut(key) {
            self.at.push(Step::Key(key.to_string()));
            f(self, child);
            self.at.pop();
        }
    }

    /// Walks into each object of the list under `key`.
    fn objects(
        &mut self,
        map: &mut Map<String, Value>,
        key: &str,
        mut f: impl FnMut(&mut Self, &mut Map<String, Value>),
    ) {
        if let Some(Value::Array(items)) = map.get_mut(key) {
            self.at.push(Step::Key(key.to_string()));
            for (i, item) in items.iter_mut().enumerate() {
                if let Value::Object(child) = item {
                    self.at.push(Step::Index(i));
                    f(self, child);
                    self.at.pop();
                }
            }
            self.at.pop();
        }
    }
}

/// Fills kube-apiserver's defaults into a built-in object (its `apiVersion` and `kind` say which
/// rules apply): every defaulted field that is absent is set; nothing present changes.
pub fn fill(object: &mut Value) {
    fill_by(object, &walk);
}

/// Fills the `default`s of a custom resource's structural schema (its version's
/// `openAPIV3Schema`) as kube-apiserver does: an absent property with a default, or a null one
/// that is not `nullable`, takes a copy of it, and the defaults inside it apply in turn.
pub fn fill_with_schema(schema: &Value, object: &mut Value) {
    fill_by(object, &|object, w| schema::root(w, schema, object));
}

/// The object as Git should hold it: `live` without the defaulted fields `kept` (Git's document
/// of it, if there is one) does not hold and that filling would set to the same value. Filling
/// the result gives `live` back; when it would not, `live` is returned whole.
#[must_use]
pub fn omit(live: Value, kept: Option<&Value>) -> Value {
    omit_by(live, kept, &walk)
}

/// As [`omit`], for a custom resource whose schema is `schema`.
#[must_use]
pub fn omit_with_schema(live: Value, kept: Option<&Value>, schema: &Value) -> Value {
    omit_by(live, kept, &|object, w| schema::root(w, schema, object))
}

/// How one kind's defaults are walked.
type Walker<'a> = dyn Fn(&mut Value, &mut Walk) + 'a;

fn fill_by(object: &mut Value, walker: &Walker<'_>) {
    walker(object, &mut Walk::new(false));
}

fn omit_by(mut live: Value, kept: Option<&Value>, walker: &Walker<'_>) -> Value {
    let mut find = Walk::new(true);
    walker(&mut live, &mut find);
    let candidates: Vec<(FieldPath, Value)> = find
        .sites
        .into_iter()
        .filter(|(site, _)| kept.is_none_or(|k| get(k, site).is_none()))
        .collect();
    if candidates.is_empty() {
        return live;
    }
    let live = &live;
    let mut out = live.clone();
    // Deepest first: a field whose default is `{}` is its default once the defaults inside it
    // are out.
    let mut removed: Vec<FieldPath> = Vec::new();
    for (site, default) in candidates.into_iter().rev() {
        if get(&out, &site) == Some(&default) {
            remove(&mut out, &site);
            removed.push(site);
        }
    }
    if removed.is_empty() {
        return out;
    }
    removed.reverse();
    let mut refilled = out.clone();
    fill_by(&mut refilled, walker);
    let differs = |site: &FieldPath| get(&refilled, site) != get(live, site);
    // Parents first: a site put back carries its live subtree without the descendant sites
    // that refill to their live values.
    let mut restored: Vec<&FieldPath> = Vec::new();
    for site in removed.iter().filter(|s| differs(s)) {
        if restored.iter().any(|r| site.starts_with(r)) {
            continue;
        }
        let Some(mut value) = get(live, site).cloned() else {
            continue;
        };
        for under in removed.iter().rev() {
            if under.len() > site.len() && under.starts_with(site) && !differs(under) {
                remove(&mut value, &under[site.len()..]);
            }
        }
        set(&mut out, site, value);
        restored.push(site);
    }
    let mut check = out.clone();
    fill_by(&mut check, walker);
    if check != *live {
        return live.clone();
    }
    // A site put back because a default it depends on was out too (`externalTrafficPolicy`
    // with `type: LoadBalancer`) can go again now that what it depends on is back.
    for site in restored {
        let mut trial = out.clone();
        remove(&mut trial, site);
        let mut check = trial.clone();
        fill_by(&mut check, walker);
        if check == *live {
            out = trial;
        }
    }
    out
}

fn walk(object: &mut Value, w: &mut Walk) {
    let Value::Object(map) = object else {
        return;
    };
    let group = match map.get("apiVersion").and_then(Value::as_str) {
        Some(api_version) => api_version
            .rsplit_once('/')
            .map_or("", |(g, _)| g)
            .to_string(),
        None => return,
    };
    let Some(kind) = map.get("kind").and_then(Value::as_str).map(str::to_string) else {
        return;
    };
    rules::object(w, &group, &kind, map);
}

fn get<'v>(mut v: &'v Value, path: &[Step]) -> Option<&'v Value> {
    for step in path {
        v = match step {
            Step::Key(k) => v.get(k)?,
            Step::Index(i) => v.get(i)?,
        };
    }
    Some(v)
}

fn get_mut<'v>(mut v: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    for step in path {
        v = match step {
            Step::Key(k) => v.get_mut(k)?,
            Step::Index(i) => v.get_mut(i)?,
        };
    }
    Some(v)
}

/// Removes the field at `path` (a path ending in a list index removes nothing: sites are fields).
fn remove(v: &mut Value, path: &[Step]) {
    if let Some((Step::Key(last), parent)) = path.split_last()
        && let Some(Value::Object(map)) = get_mut(v, parent)
    {
        map.remove(last);
    }
}

/// Sets the field at `path`, creating the objects on the way that a removal took out.
fn set(v: &mut Value, path: &[Step], value: Value) {
    let Some((Step::Key(last), parent)) = path.split_last() else {
        return;
    };
    let mut at = v;
    for step in parent {
        at = match (step, at) {
            (Step::Key(k), Value::Object(map)) => map
                .entry(k.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            (Step::Index(i), Value::Array(items)) => match items.get_mut(*i) {
                Some(item) => item,
                None => return,
            },
            _ => return,
        };
    }
    if let Value::Object(map) = at {
        map.insert(last.clone(), value);
    }
}

#[cfg(test)]
mod tests;
