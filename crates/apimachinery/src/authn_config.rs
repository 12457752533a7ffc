//! Authentication configuration of OIDC issuers as kube-apiserver reads it, without I/O:
//! the classic `--oidc-*` flags and the `jwt` entries of a structured
//! `AuthenticationConfiguration` (`apiserver.config.k8s.io`), into one [`JwtConfig`] per
//! issuer. The API server verifies tokens with them; a LogicalCluster's
//! `spec.authentication` is validated with them.

use serde_json::Value;

/// A signing algorithm a token may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Ps384,
    Ps512,
    Es256,
    Es384,
}

impl Alg {
    pub fn parse(s: &str) -> Option<Alg> {
        Some(match s {
            "RS256" => Alg::Rs256,
            "RS384" => Alg::Rs384,
            "RS512" => Alg::Rs512,
            "PS256" => Alg::Ps256,
            "PS384" => Alg::Ps384,
            "PS512" => Alg::Ps512,
            "ES256" => Alg::Es256,
            "ES384" => Alg::Es384,
            _ => return None,
        })
    }

    pub const ALL: [Alg; 8] = [
        Alg::Rs256,
        Alg::Rs384,
        Alg::Rs512,
        Alg::Ps256,
        Alg::Ps384,
        Alg::Ps512,
        Alg::Es256,
        Alg::Es384,
    ];
}

/// A claim and the prefix of what it gives, or a CEL expression over `claims`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimMapping {
    pub claim: String,
    pub prefix: String,
    pub expression: Option<String>,
}

/// One issuer's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    pub issuer_url: String,
    pub discovery_url: Option<String>,
    pub audiences: Vec<String>,
    /// PEM of the CAs trusted for the issuer's TLS (None: the platform's own roots are not
    /// known to this binary, so one is required for HTTPS to a private issuer).
    pub certificate_authority: Option<String>,
    pub username: ClaimMapping,
    pub groups: Option<ClaimMapping>,
    pub uid_claim: Option<String>,
    pub uid_expression: Option<String>,
    /// `claimMappings.extra`: (key, valueExpression).
    pub extra: Vec<(String, String)>,
    /// `{claim, requiredValue}` rules (and the `--oidc-required-claim` flags).
    pub required_claims: Vec<(String, String)>,
    /// `{expression, message}` claim validation rules.
    pub claim_expressions: Vec<(String, String)>,
    /// `userValidationRules`: (expression over `user`, message).
    pub user_rules: Vec<(String, String)>,
    pub algorithms: Vec<Alg>,
}

impl JwtConfig {
    /// Every CEL expression of the configuration (to compile them all).
    pub fn expressions(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        out.extend(self.username.expression.as_deref());
        out.extend(self.groups.as_ref().and_then(|g| g.expression.as_deref()));
        out.extend(self.uid_expression.as_deref());
        out.extend(self.extra.iter().map(|(_, e)| e.as_str()));
        out.extend(self.claim_expressions.iter().map(|(e, _)| e.as_str()));
        out.extend(self.user_rules.iter().map(|(e, _)| e.as_str()));
        out
    }
}

/// The classic flags of kube-apiserver.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub issuer_url: Option<String>,
    pub client_id: Option<String>,
    pub username_claim: Option<String>,
    pub username_prefix: Option<String>,
    pub groups_claim: Option<String>,
    pub groups_prefix: Option<String>,
    pub required_claims: Vec<String>,
    pub signing_algs: Vec<String>,
    pub ca_pem: Option<String>,
}

impl Flags {
    pub fn any(&self) -> bool {
        self.issuer_url.is_some()
            || self.client_id.is_some()
            || self.username_claim.is_some()
            || self.username_prefix.is_some()
            || self.groups_claim.is_some()
            || self.groups_prefix.is_some()
            || !self.required_claims.is_empty()
            || !self.signing_algs.is_empty()
            || self.ca_pem.is_some()
    }

    /// The one authenticator the flags describe (None when no issuer is set).
    pub fn config(&self) -> Result<Option<JwtConfig>, String> {
        let (Some(url), Some(client)) = (&self.issuer_url, &self.client_id) else {
            if self.issuer_url.is_some() || self.client_id.is_some() {
                return Err(
                    "oidc-issuer-url and oidc-client-id should be specified together".into(),
                );
            }
            return Ok(None);
        };
        check_issuer_url(url)?;
        let claim = self.username_claim.clone().unwrap_or_else(|| "sub".into());
        let prefix = match self.username_prefix.as_deref() {
            None if claim != "email" => format!("{url}#"),
            None | Some("-") => String::new(),
            Some(p) => p.to_string(),
        };
        let mut required = Vec::new();
        for r in &self.required_claims {
            let Some((k, v)) = r.split_once('=') else {
                return Err(format!("oidc-required-claim {r:?} is not key=value"));
            };
            required.push((k.to_string(), v.to_string()));
        }
        let algorithms = if self.signing_algs.is_empty() {
            vec![Alg::Rs256]
        } else {
            self.signing_algs
                .iter()
                .map(|a| {
                    Alg::parse(a).ok_or_else(|| format!("oidc-signing-algs: {a} is not supported"))
                })
                .collect::<Result<_, _>>()?
        };
        Ok(Some(JwtConfig {
            issuer_url: url.clone(),
            discovery_url: None,
            audiences: vec![client.clone()],
            certificate_authority: self.ca_pem.clone(),
            username: ClaimMapping {
                claim,
                prefix,
                expression: None,
            },
            groups: self.groups_claim.as_ref().map(|c| ClaimMapping {
                claim: c.clone(),
                prefix: self.groups_prefix.clone().unwrap_or_default(),
                expression: None,
            }),
            uid_claim: None,
            uid_expression: None,
            extra: Vec::new(),
            required_claims: required,
            claim_expressions: Vec::new(),
            user_rules: Vec::new(),
            algorithms,
        }))
    }
}

/// An issuer URL as kube-apiserver accepts it: https, a host, no user info, query or
/// fragment.
pub fn check_issuer_url(url: &str) -> Result<(), String> {
    let Some(rest) = url.strip_prefix("https://") else {
        return Err(format!("issuer URL {url:?} must use https"));
    };
    let authority = rest.split('/').next().unwrap_or("");
    if authority.is_empty() {
        return Err(format!("issuer URL {url:?} has no host"));
    }
    if url.contains('?') || url.contains('#') || authority.contains('@') {
        return Err(format!(
            "issuer URL {url:?} must not have a query, fragment or user info"
        ));
    }
    Ok(())
}

/// The `jwt` entries of an `AuthenticationConfiguration` (`apiserver.config.k8s.io`
/// v1alpha1, v1beta1 or v1), checked as kube-apiserver's validation checks them (the CEL
/// expressions are only parsed by whoever compiles them).
pub fn parse_authentication_config(doc: &Value) -> Result<Vec<JwtConfig>, String> {
    let av = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if !matches!(
        av,
        "apiserver.config.k8s.io/v1alpha1"
            | "apiserver.config.k8s.io/v1beta1"
            | "apiserver.config.k8s.io/v1"
    ) || doc.get("kind").and_then(Value::as_str) != Some("AuthenticationConfiguration")
    {
        return Err(format!(
            "not an AuthenticationConfiguration of apiserver.config.k8s.io (apiVersion {av:?})"
        ));
    }
    let jwt = doc
        .get("jwt")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if jwt.len() > 64 {
        return Err("jwt: Too many: must have at most 64 items".into());
    }
    let mut out: Vec<JwtConfig> = Vec::new();
    for (i, j) in jwt.iter().enumerate() {
        let path = format!("jwt[{i}]");
        let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let issuer = j.get("issuer").cloned().unwrap_or_default();
        let url = s(issuer.get("url")).ok_or(format!("{path}.issuer.url: Required value"))?;
        check_issuer_url(&url).map_err(|e| format!("{path}.issuer.url: Invalid value: {e}"))?;
        if out.iter().any(|o| o.issuer_url == url) {
            return Err(format!("{path}.issuer.url: Duplicate value: {url:?}"));
        }
        let discovery_url = s(issuer.get("discoveryURL"));
        if discovery_url.as_deref() == Some(url.as_str()) {
            return Err(format!(
                "{path}.issuer.discoveryURL: Invalid value: must be different from the issuer URL"
            ));
        }
        let mut audiences: Vec<String> = issuer
            .get("audiences")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if audiences.is_empty() {
            return Err(format!(
                "{path}.issuer.audiences: Required value: at least one issuer.audiences is required"
            ));
        }
        let n = audiences.len();
        audiences.sort();
        audiences.dedup();
        if audiences.len() != n {
            return Err(format!("{path}.issuer.audiences: Duplicate value"));
        }
        let mappings = j.get("claimMappings").cloned().unwrap_or_default();
        let mapping = |name: &str, required: bool| -> Result<Option<ClaimMapping>, String> {
            let Some(m) = mappings.get(name) else {
                return if required {
                    Err(format!("{path}.claimMappings.{name}: Required value"))
                } else {
                    Ok(None)
                };
            };
            let claim = s(m.get("claim")).filter(|c| !c.is_empty());
            let prefix = s(m.get("prefix"));
            if let Some(e) = s(m.get("expression")).filter(|e| !e.is_empty()) {
                if claim.is_some() {
                    return Err(format!(
                        "{path}.claimMappings.{name}: Invalid value: claim and expression can't both be set"
                    ));
                }
                if prefix.is_some() {
                    return Err(format!(
                        "{path}.claimMappings.{name}.prefix: Invalid value: may not be specified when expression is set"
                    ));
                }
                return Ok(Some(ClaimMapping {
                    expression: Some(e),
                    ..Default::default()
                }));
            }
            match (claim, prefix) {
                (Some(claim), Some(prefix)) => Ok(Some(ClaimMapping {
                    claim,
                    prefix,
                    expression: None,
                })),
                (None, _) if !required => Ok(None),
                (None, _) => Err(format!(
                    "{path}.claimMappings.{name}.claim: Required value: claim or expression is required"
                )),
                (Some(_), None) => Err(format!(
                    "{path}.claimMappings.{name}.prefix: Required value: prefix is required when claim is set"
                )),
            }
        };
        let username = mapping("username", true)?.expect("required");
        let groups = mapping("groups", false)?;
        let uid_claim = mappings.get("uid").and_then(|u| s(u.get("claim")));
        let uid_expression = mappings.get("uid").and_then(|u| s(u.get("expression")));
        if uid_claim.is_some() && uid_expression.is_some() {
            return Err(format!(
                "{path}.claimMappings.uid: Invalid value: claim and expression can't both be set"
            ));
        }
        let mut extra = Vec::new();
        for (k, e) in mappings
            .get("extra")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let key = s(e.get("key")).unwrap_or_default();
            let value = s(e.get("valueExpression")).unwrap_or_default();
            if key.is_empty() || value.is_empty() {
                return Err(format!(
                    "{path}.claimMappings.extra[{k}]: Required value: key and valueExpression are required"
                ));
            }
            let domain = key.split('/').next().unwrap_or("");
            if key != key.to_lowercase()
                || !key.contains('/')
                || domain.ends_with("kubernetes.io")
                || domain.ends_with("k8s.io")
            {
                return Err(format!(
                    "{path}.claimMappings.extra[{k}].key: Invalid value: {key:?}: must be a lowercase domain-prefixed path, not under kubernetes.io or k8s.io"
                ));
            }
            if extra.iter().any(|(have, _)| have == &key) {
                return Err(format!(
                    "{path}.claimMappings.extra[{k}].key: Duplicate value: {key:?}"
                ));
            }
            extra.push((key, value));
        }
        let mut required_claims = Vec::new();
        let mut claim_expressions = Vec::new();
        for (k, r) in j
            .get("claimValidationRules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(e) = s(r.get("expression")) {
                if r.get("claim").is_some() {
                    return Err(format!(
                        "{path}.claimValidationRules[{k}]: Invalid value: claim and expression can't both be set"
                    ));
                }
                claim_expressions.push((e, s(r.get("message")).unwrap_or_default()));
                continue;
            }
            let claim = s(r.get("claim")).ok_or(format!(
                "{path}.claimValidationRules[{k}].claim: Required value"
            ))?;
            required_claims.push((claim, s(r.get("requiredValue")).unwrap_or_default()));
        }
        let mut user_rules = Vec::new();
        for (k, r) in j
            .get("userValidationRules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let e = s(r.get("expression")).ok_or(format!(
                "{path}.userValidationRules[{k}].expression: Required value"
            ))?;
            user_rules.push((e, s(r.get("message")).unwrap_or_default()));
        }
        // A username made from `claims.email` must look at `claims.email_verified` somewhere.
        if username
            .expression
            .as_deref()
            .is_some_and(|e| e.contains("claims.email") && !e.contains("email_verified"))
        {
            let elsewhere = extra
                .iter()
                .map(|(_, e)| e)
                .chain(claim_expressions.iter().map(|(e, _)| e))
                .any(|e| e.contains("email_verified"));
            if !elsewhere {
                return Err(format!(
                    "{path}.claimMappings.username.expression: Invalid value: claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression"
                ));
            }
        }
        out.push(JwtConfig {
            issuer_url: url,
            discovery_url,
            audiences,
            certificate_authority: s(issuer.get("certificateAuthority")),
            username,
            groups,
            uid_expression,
            extra,
            claim_expressions,
            user_rules,
            uid_claim,
            required_claims,
            algorithms: Alg::ALL.to_vec(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flags(url: &str) -> Flags {
        Flags {
            issuer_url: Some(url.into()),
            client_id: Some("kubectl".into()),
            ..Default::default()
        }
    }

    #[test]
    fn flag_prefixes_follow_kube_apiserver() {
        let c = flags("https://idp.example").config().unwrap().unwrap();
        assert_eq!(c.username.claim, "sub");
        assert_eq!(c.username.prefix, "https://idp.example#");
        let mut f = flags("https://idp.example");
        f.username_claim = Some("email".into());
        assert_eq!(f.config().unwrap().unwrap().username.prefix, "");
        f.username_claim = Some("preferred_username".into());
        f.username_prefix = Some("-".into());
        assert_eq!(f.config().unwrap().unwrap().username.prefix, "");
        f.username_prefix = Some("oidc:".into());
        assert_eq!(f.config().unwrap().unwrap().username.prefix, "oidc:");
        assert_eq!(f.config().unwrap().unwrap().algorithms, vec![Alg::Rs256]);
        let only_url = Flags {
            issuer_url: Some("https://idp.example".into()),
            ..Default::default()
        };
        assert_eq!(
            only_url.config().unwrap_err(),
            "oidc-issuer-url and oidc-client-id should be specified together"
        );
        assert!(flags("http://idp.example").config().is_err());
    }

    #[test]
    fn a_structured_configuration_needs_prefixes_and_refuses_what_is_not_supported() {
        let doc = json!({"apiVersion": "apiserver.config.k8s.io/v1beta1", "kind": "AuthenticationConfiguration",
            "jwt": [{"issuer": {"url": "https://idp.example", "audiences": ["a", "b"]},
                     "claimMappings": {"username": {"claim": "email", "prefix": ""}, "groups": {"claim": "groups", "prefix": "g:"}},
                     "claimValidationRules": [{"claim": "hd", "requiredValue": "example.com"}]}]});
        let c = parse_authentication_config(&doc).unwrap();
        assert_eq!(c[0].audiences, ["a", "b"]);
        assert_eq!(c[0].groups.as_ref().unwrap().prefix, "g:");
        assert_eq!(
            c[0].required_claims,
            [("hd".to_string(), "example.com".to_string())]
        );
        let mut no_prefix = doc.clone();
        no_prefix["jwt"][0]["claimMappings"]["username"] = json!({"claim": "email"});
        assert_eq!(
            parse_authentication_config(&no_prefix).unwrap_err(),
            "jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set"
        );
        let mut cel = doc.clone();
        cel["jwt"][0]["claimMappings"]["username"] = json!({"expression": "claims.sub"});
        assert_eq!(
            parse_authentication_config(&cel).unwrap()[0]
                .username
                .expression
                .as_deref(),
            Some("claims.sub")
        );
        cel["jwt"][0]["claimMappings"]["username"] = json!({"expression": "claims.email"});
        assert!(
            parse_authentication_config(&cel)
                .unwrap_err()
                .contains("claims.email_verified must be used")
        );
        cel["jwt"][0]["claimValidationRules"] =
            json!([{"expression": "claims.?email_verified.orValue(true) == true"}]);
        assert!(parse_authentication_config(&cel).is_ok());
        cel["jwt"][0]["claimMappings"]["username"] =
            json!({"expression": "claims.sub", "prefix": "x:"});
        assert!(
            parse_authentication_config(&cel)
                .unwrap_err()
                .contains("prefix")
        );
        let mut dup = doc.clone();
        let first = doc["jwt"][0].clone();
        dup["jwt"].as_array_mut().unwrap().push(first);
        assert!(
            parse_authentication_config(&dup)
                .unwrap_err()
                .contains("Duplicate")
        );
    }
}
