//! Content negotiation: what a request body is (`Content-Type`) and what the client accepts
//! back (`Accept`, with the `as`/`g`/`v` parameters of Tables, PartialObjectMetadata and
//! aggregated discovery).

/// A media type with its parameters, from an `Accept` or `Content-Type` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaType {
    /// `type/subtype`, lowercase.
    pub essence: String,
    pub params: Vec<(String, String)>,
}

impl MediaType {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn matches_json(&self) -> bool {
        matches!(
            self.essence.as_str(),
            "application/json" | "application/*" | "*/*"
        )
    }
}

/// Parses a comma-separated list of media types with `;` parameters, dropping `q=0` entries.
pub fn parse_accept(header: &str) -> Vec<MediaType> {
    header
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';');
            let essence = pieces.next()?.trim().to_ascii_lowercase();
            if essence.is_empty() {
                return None;
            }
            let params: Vec<(String, String)> = pieces
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((
                        k.trim().to_ascii_lowercase(),
                        v.trim().trim_matches('"').to_string(),
                    ))
                })
                .collect();
            if params
                .iter()
                .any(|(k, v)| k == "q" && v.parse::<f32>().is_ok_and(|q| q == 0.0))
            {
                return None;
            }
            Some(MediaType { essence, params })
        })
        .collect()
}

/// What a response to an object or list request is rendered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Json,
    Yaml,
    Protobuf,
    Table,
    /// `PartialObjectMetadata` (and `PartialObjectMetadataList` for lists).
    Metadata,
}

/// Chooses the output for a resource request: the first acceptable entry wins.
/// `None` when nothing acceptable is offered (406).
pub fn choose_output(accept: Option<&str>) -> Option<Output> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(Output::Json);
    };
    for mt in parse_accept(accept) {
        match mt.param("as") {
            Some("Table") if mt.param("g") == Some("meta.k8s.io") && mt.matches_json() => {
                return Some(Output::Table);
            }
            Some("PartialObjectMetadata" | "PartialObjectMetadataList")
                if mt.param("g") == Some("meta.k8s.io")
                    && mt.param("v") == Some("v1")
                    && mt.matches_json() =>
            {
                return Some(Output::Metadata);
            }
            Some(_) => continue,
            None => {}
        }
        match mt.essence.as_str() {
            "application/json" | "application/*" | "*/*" | "application/json;stream=watch" => {
                return Some(Output::Json);
            }
            "application/yaml" => return Some(Output::Yaml),
            "application/vnd.kubernetes.protobuf"
            | "application/vnd.kubernetes.protobuf;stream=watch" => {
                return Some(Output::Protobuf);
            }
            _ => {}
        }
    }
    None
}

/// Which aggregated discovery version the client accepts, if any (`v2` or `v2beta1`).
pub fn aggregated_discovery(accept: Option<&str>) -> Option<&'static str> {
    for mt in parse_accept(accept?) {
        if mt.param("as") == Some("APIGroupDiscoveryList")
            && mt.param("g") == Some("apidiscovery.k8s.io")
        {
            match mt.param("v") {
                Some("v2") => return Some("v2"),
                Some("v2beta1") => return Some("v2beta1"),
                _ => {}
            }
        } else if mt.param("as").is_none() && mt.matches_json() {
            return None;
        }
    }
    None
}

/// The kind of a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyType {
    Json,
    Yaml,
    Protobuf,
    JsonPatch,
    MergePatch,
    StrategicMergePatch,
    ApplyPatch,
    Cbor,
    Unknown,
}

/// Classifies a `Content-Type`; an absent one is JSON, as upstream treats it.
pub fn body_type(content_type: Option<&str>) -> BodyType {
    let Some(ct) = content_type.filter(|c| !c.trim().is_empty()) else {
        return BodyType::Json;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" | "*/*" => BodyType::Json,
        "application/yaml" | "application/x-yaml" | "text/yaml" => BodyType::Yaml,
        "application/vnd.kubernetes.protobuf" => BodyType::Protobuf,
        "application/json-patch+json" => BodyType::JsonPatch,
        "application/merge-patch+json" => BodyType::MergePatch,
        "application/strategic-merge-patch+json" => BodyType::StrategicMergePatch,
        "application/apply-patch+yaml" => BodyType::ApplyPatch,
        "application/cbor" | "application/apply-patch+cbor" => BodyType::Cbor,
        _ => BodyType::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_get_asks_for_a_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(choose_output(Some(a)), Some(Output::Table));
    }

    #[test]
    fn protobuf_first_with_json_fallback_is_answered_in_protobuf_only_when_first() {
        assert_eq!(
            choose_output(Some("application/vnd.kubernetes.protobuf,application/json")),
            Some(Output::Protobuf)
        );
        assert_eq!(
            choose_output(Some("application/json, */*")),
            Some(Output::Json)
        );
        assert_eq!(choose_output(None), Some(Output::Json));
        assert_eq!(choose_output(Some("text/html")), None);
    }

    #[test]
    fn metadata_only_requests_are_recognised() {
        let a = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(choose_output(Some(a)), Some(Output::Metadata));
    }

    #[test]
    fn aggregated_discovery_versions_are_negotiated_in_order() {
        let agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_discovery(Some(agg)), Some("v2"));
        let old = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_discovery(Some(old)), Some("v2beta1"));
        assert_eq!(aggregated_discovery(Some("application/json")), None);
    }

    #[test]
    fn an_absent_content_type_is_json() {
        assert_eq!(body_type(None), BodyType::Json);
        assert_eq!(
            body_type(Some("application/apply-patch+yaml; charset=utf-8")),
            BodyType::ApplyPatch
        );
        assert_eq!(body_type(Some("application/xml")), BodyType::Unknown);
    }
}
