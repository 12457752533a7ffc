//! Authorization: RBAC evaluated against the cluster's own Roles and bindings, read from the
//! watch cache (nothing is copied but `Arc`s).

pub use controlplane::authz::{Attributes, CachePolicy, allowed, check, check_rbac_write};

/// The authorization attributes of a routed request; `None` for nothing to authorize.
pub fn request_attributes(
    route: &crate::route::Route,
    path: &str,
    ctx: &crate::server::Ctx,
) -> Attributes {
    match route {
        crate::route::Route::Resource(p) => {
            let verb = crate::handlers::verb(&ctx.method, p, ctx);
            let mut name = p.name.clone().unwrap_or_default();
            if name.is_empty() && matches!(verb, "list" | "watch") {
                // A list or watch of one object by name counts as that object (resourceNames).
                if let Some(sel) = ctx.query.get("fieldSelector")
                    && let Ok(fs) = apimachinery::fields::FieldSelector::parse(sel)
                    && let Some(n) = fs.requires_exact_match("metadata.name")
                {
                    name = n.to_string();
                }
            }
            let mut a =
                Attributes::resource(verb, &p.group, &p.resource, &p.namespace).named(&name);
            a.api_version = p.version.clone();
            if let Some(sub) = &p.subresource {
                a = a.subresource(sub);
            }
            a
        }
        _ => {
            let verb = match ctx.method.as_str() {
                "GET" | "HEAD" => "get",
                other => return Attributes::non_resource(&other.to_ascii_lowercase(), path),
            };
            Attributes::non_resource(verb, path)
        }
    }
}
