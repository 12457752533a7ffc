//! The web console served by `matryoshka up` at `/console/`: HTML rendered on the server from
//! Rust code (maud), so a page works without JavaScript and the API server's own validation is
//! the only validator.
//!
//! - [`form`]: a form generated from an OpenAPI v3 schema (a CRD's `spec`), the submitted form
//!   read back into JSON, and field errors — the API server's `Status` causes or the form's own
//!   conversion errors — shown next to the field they name;
//! - [`app`]: the console's requests, answered over the Kubernetes API as the signed-in user
//!   (the API server hands them over and writes the answers out as HTTP);
//! - [`pages`]: the pages as functions of what the API returned (sign-in, tenant clusters, a
//!   cluster's details with scaling and kubeconfigs, the create/edit form, delete).

pub mod app;
pub mod chart;
pub mod form;
pub mod oidc;
pub mod pages;
