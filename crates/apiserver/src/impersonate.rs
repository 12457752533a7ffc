//! Impersonation: `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and
//! `Impersonate-Extra-<key>` headers, each allowed only when the requester may `impersonate`
//! the corresponding resource.

use apimachinery::status::ApiError;

use crate::auth::UserInfo;
use crate::authz::{self, Attributes};
use crate::server::{ApiServer, Ctx};

fn values(ctx: &Ctx, name: &str) -> Vec<String> {
    ctx.headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect()
}

/// Replaces the request's user with the impersonated one, if the headers ask for it and the
/// requester is allowed.
pub fn apply(server: &ApiServer, ctx: &mut Ctx) -> Result<(), ApiError> {
    let user = values(ctx, "impersonate-user");
    let groups = values(ctx, "impersonate-group");
    let uid = values(ctx, "impersonate-uid");
    let extra: Vec<(String, String)> = ctx
        .headers
        .iter()
        .filter_map(|(k, v)| {
            let key = k.as_str().strip_prefix("impersonate-extra-")?;
            Some((
                crate::route::percent_decode(key),
                v.to_str().ok()?.to_string(),
            ))
        })
        .collect();
    if user.is_empty() {
        if !groups.is_empty() || !uid.is_empty() || !extra.is_empty() {
            // Upstream answers 500 here; it is the client's error, so 400, naming what was
            // asked.
            let mut asked: Vec<String> = Vec::new();
            asked.extend(groups.iter().map(|g| format!("Impersonate-Group: {g}")));
            asked.extend(uid.iter().map(|u| format!("Impersonate-Uid: {u}")));
            asked.extend(
                extra
                    .iter()
                    .map(|(k, v)| format!("Impersonate-Extra-{k}: {v}")),
            );
            return Err(ApiError::bad_request(format!(
                "requested [{}] without impersonating a user (Impersonate-User)",
                asked.join(", ")
            )));
        }
        return Ok(());
    }
    let requester = ctx.user.clone();
    let check = |resource: &str,
                 group: &str,
                 name: &str,
                 namespace: &str,
                 sub: &str|
     -> Result<(), ApiError> {
        let mut attrs = Attributes::resource("impersonate", group, resource, namespace).named(name);
        if !sub.is_empty() {
            attrs = attrs.subresource(sub);
        }
        authz::check(server.control_plane(), &ctx.cluster, &requester, &attrs)
    };
    let name = &user[0];
    if let Some(rest) = name.strip_prefix("system:serviceaccount:") {
        let (ns, sa) = rest.split_once(':').unwrap_or(("", rest));
        check("serviceaccounts", "", sa, ns, "")?;
    } else {
        check("users", "", name, "", "")?;
    }
    for g in &groups {
        check("groups", "", g, "", "")?;
    }
    for u in &uid {
        check("uids", "authentication.k8s.io", u, "", "")?;
    }
    for (k, v) in &extra {
        check("userextras", "authentication.k8s.io", v, "", k)?;
    }
    let mut new = UserInfo {
        name: name.clone(),
        uid: uid.first().cloned().unwrap_or_default(),
        groups,
        extra: Vec::new(),
    };
    for (k, v) in extra {
        match new.extra.iter_mut().find(|(x, _)| *x == k) {
            Some((_, vs)) => vs.push(v),
            None => new.extra.push((k, vec![v])),
        }
    }
    if let Some(rest) = name.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
        && new.groups.is_empty()
    {
        new.groups = vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
        ];
    }
    if !new.groups.iter().any(|g| g == "system:authenticated") && name != "system:anonymous" {
        new.groups.push("system:authenticated".into());
    }
    ctx.user = new;
    Ok(())
}
