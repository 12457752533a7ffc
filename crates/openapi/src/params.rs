//! Query and path parameters of the REST operations, as OpenAPI v3 parameter objects.
//!
//! Names, locations and types follow kube-apiserver; the descriptions are short summaries of
//! our own. kubectl looks for `fieldValidation` among a PATCH operation's own parameters to
//! decide whether the server validates fields, so the write parameters are listed on every
//! operation rather than referenced.

use serde_json::{Value, json};

/// One query parameter: name, JSON type, description.
pub(crate) type Query = (&'static str, &'static str, &'static str);

const ALLOW_WATCH_BOOKMARKS: Query = (
    "allowWatchBookmarks",
    "boolean",
    "Requests watch events of type BOOKMARK; servers may send them at their discretion.",
);
const CONTINUE: Query = (
    "continue",
    "string",
    "The continue token of a previous paged list response, to fetch the next page.",
);
const DRY_RUN: Query = (
    "dryRun",
    "string",
    "When present, the request is processed in full but nothing is persisted. Valid value: All.",
);
const FIELD_MANAGER: Query = (
    "fieldManager",
    "string",
    "The name of the actor making the change, recorded in managedFields. Required for apply patches.",
);
const FIELD_SELECTOR: Query = (
    "fieldSelector",
    "string",
    "Restricts the returned objects by their fields. Defaults to everything.",
);
const FIELD_VALIDATION: Query = (
    "fieldValidation",
    "string",
    "How to treat unknown or duplicate fields in the request body: Ignore drops them, Warn drops them with a warning header (the default), Strict rejects the request.",
);
const FORCE: Query = (
    "force",
    "boolean",
    "Forces an apply patch to take ownership of fields owned by other managers. Must be unset for other patch types.",
);
const GRACE_PERIOD_SECONDS: Query = (
    "gracePeriodSeconds",
    "integer",
    "Seconds to wait before deleting the object; zero deletes immediately.",
);
const LABEL_SELECTOR: Query = (
    "labelSelector",
    "string",
    "Restricts the returned objects by their labels. Defaults to everything.",
);
const LIMIT: Query = (
    "limit",
    "integer",
    "The maximum number of objects in one page of a list; the response carries a continue token when more remain.",
);
const ORPHAN_DEPENDENTS: Query = (
    "orphanDependents",
    "boolean",
    "Deprecated: use propagationPolicy. Whether dependents are orphaned.",
);
const PROPAGATION_POLICY: Query = (
    "propagationPolicy",
    "string",
    "How dependents are garbage collected: Orphan, Background or Foreground.",
);
const RESOURCE_VERSION: Query = (
    "resourceVersion",
    "string",
    "Constrains which resource version the request is served from.",
);
const RESOURCE_VERSION_MATCH: Query = (
    "resourceVersionMatch",
    "string",
    "How resourceVersion applies to a list: Exact or NotOlderThan.",
);
const SEND_INITIAL_EVENTS: Query = (
    "sendInitialEvents",
    "boolean",
    "With watch=true, starts the stream with the current objects, ended by a BOOKMARK annotated k8s.io/initial-events-end.",
);
const TIMEOUT_SECONDS: Query = (
    "timeoutSeconds",
    "integer",
    "Time limit of the list or watch call.",
);
const WATCH: Query = (
    "watch",
    "boolean",
    "Streams additions, updates and deletions of the described objects instead of listing them.",
);
pub(crate) const PRETTY: Query = (
    "pretty",
    "string",
    "If 'true', the output is pretty printed.",
);

/// Log options of `pods/log`.
const LOG: &[Query] = &[
    (
        "container",
        "string",
        "The container whose logs to return; defaults to the only container.",
    ),
    ("follow", "boolean", "Streams the logs as they are written."),
    (
        "limitBytes",
        "integer",
        "The maximum number of bytes to return.",
    ),
    (
        "previous",
        "boolean",
        "Returns the logs of the previous, terminated container.",
    ),
    (
        "sinceSeconds",
        "integer",
        "Returns only logs newer than this many seconds.",
    ),
    (
        "tailLines",
        "integer",
        "Returns this many lines from the end of the log.",
    ),
    (
        "timestamps",
        "boolean",
        "Prefixes every line with an RFC3339 timestamp.",
    ),
];

/// Parameters of a list (and of a watch through `?watch=true`).
pub(crate) const LIST: &[Query] = &[
    ALLOW_WATCH_BOOKMARKS,
    CONTINUE,
    FIELD_SELECTOR,
    LABEL_SELECTOR,
    LIMIT,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    TIMEOUT_SECONDS,
    WATCH,
];
/// Parameters of create and replace.
pub(crate) const WRITE: &[Query] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION];
/// Parameters of patch.
pub(crate) const PATCH: &[Query] = &[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE];
/// Parameters of delete.
pub(crate) const DELETE: &[Query] = &[
    DRY_RUN,
    GRACE_PERIOD_SECONDS,
    ORPHAN_DEPENDENTS,
    PROPAGATION_POLICY,
];
/// Parameters of deletecollection.
pub(crate) const DELETE_COLLECTION: &[Query] = &[
    CONTINUE,
    DRY_RUN,
    FIELD_SELECTOR,
    GRACE_PERIOD_SECONDS,
    LABEL_SELECTOR,
    LIMIT,
    ORPHAN_DEPENDENTS,
    PROPAGATION_POLICY,
    RESOURCE_VERSION,
    RESOURCE_VERSION_MATCH,
    SEND_INITIAL_EVENTS,
    TIMEOUT_SECONDS,
];
/// Parameters of `pods/log`.
pub(crate) const POD_LOG: &[Query] = LOG;

const CONTAINER: Query = (
    "container",
    "string",
    "The container in which to run the command (or to attach to); defaults to the only container.",
);
const STDIN: Query = (
    "stdin",
    "boolean",
    "Redirects the standard input stream of the pod.",
);
const STDOUT: Query = (
    "stdout",
    "boolean",
    "Redirects the standard output stream of the pod.",
);
const STDERR: Query = (
    "stderr",
    "boolean",
    "Redirects the standard error stream of the pod.",
);
const TTY: Query = ("tty", "boolean", "Allocates a terminal for the session.");
const EXEC: &[Query] = &[
    (
        "command",
        "string",
        "The command to run, one parameter per argument.",
    ),
    CONTAINER,
    STDERR,
    STDIN,
    STDOUT,
    TTY,
];
const ATTACH: &[Query] = &[CONTAINER, STDERR, STDIN, STDOUT, TTY];
const PORT_FORWARD: &[Query] = &[("ports", "integer", "The pod ports to forward.")];
const PROXY: &[Query] = &[(
    "path",
    "string",
    "The path of the request to proxy (the URL path after `proxy/` takes precedence).",
)];

/// The query parameters of a connect subresource (exec, attach, port-forward, proxy), which
/// answers streams rather than objects; `None` for the others.
pub(crate) fn connect(plural: &str, subresource: &str) -> Option<&'static [Query]> {
    match (plural, subresource) {
        ("pods", "exec") => Some(EXEC),
        ("pods", "attach") => Some(ATTACH),
        ("pods", "portforward") => Some(PORT_FORWARD),
        ("pods" | "nodes" | "services", "proxy") => Some(PROXY),
        _ => None,
    }
}

/// A query parameter object.
pub(crate) fn query((name, ty, description): Query) -> Value {
    json!({
        "description": description,
        "in": "query",
        "name": name,
        "schema": { "type": ty, "uniqueItems": true },
    })
}

/// The query parameter objects of a list.
pub(crate) fn queries(list: &[Query]) -> Value {
    Value::Array(list.iter().copied().map(query).collect())
}

/// A path parameter object.
pub(crate) fn path(name: &str, description: &str) -> Value {
    json!({
        "description": description,
        "in": "path",
        "name": name,
        "required": true,
        "schema": { "type": "string", "uniqueItems": true },
    })
}

pub(crate) fn name_of(kind: &str) -> Value {
    path("name", &format!("the name of the {kind}"))
}

pub(crate) fn namespace() -> Value {
    path("namespace", "the namespace of the object")
}
