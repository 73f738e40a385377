//! How a Kubernetes API error reads for a person: the API server's own message, reason and
//! code — not the `Status` structure's debug dump kube's `Display` appends.

/// `error` as a person reads it: for an error the API returned, its message, then its reason
/// and HTTP code (`configmaps "x" is forbidden: … (Forbidden, 403)`); otherwise the error's
/// own text.
#[must_use]
pub fn explain(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let message = status.message.trim();
            let reason = status.reason.trim();
            match (message.is_empty(), reason.is_empty()) {
                (false, false) => format!("{message} ({reason}, {})", status.code),
                (false, true) => format!("{message} ({})", status.code),
                (true, false) => format!("{reason} ({})", status.code),
                (true, true) => format!("the API answered {}", status.code),
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_error_reads_as_the_server_said_it_without_a_debug_dump() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "code": 403,
            "reason": "Forbidden",
            "message": "configmaps \"x\" is forbidden: User \"backflow\" cannot patch resource",
        }))
        .expect("a Status");
        let shown = explain(&kube::Error::Api(Box::new(status)));
        assert_eq!(
            shown,
            "configmaps \"x\" is forbidden: User \"backflow\" cannot patch resource (Forbidden, 403)"
        );
        assert!(!shown.contains("Status {"), "{shown}");
    }
}
