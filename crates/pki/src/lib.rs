//! Public-key infrastructure without HTTP: certificate authorities, serving and client
//! certificates, kubeconfigs, and writing key material to disk.
//!
//! The API server uses it for its serving certificate and each logical cluster's CA; the
//! platform issues tenant clusters' admin kubeconfigs from those CAs; the `matryoshka` binary
//! writes the operator's kubeconfig. Nothing here opens a socket.
//!
//! - [`ca`]: [`Ca`] (generate, load or create on disk, issue serving and client
//!   certificates) and [`CertPair`] (a certificate and its key, PEM);
//! - [`kubeconfig()`]: a kubeconfig with the CA and a client certificate embedded;
//! - [`files`]: [`write_private`] and [`write_private_bytes`] (mode 0600, atomic).

pub mod ca;
pub mod files;
pub mod kubeconfig;

pub use ca::{CA_VALIDITY, Ca, CertPair, Error, LEAF_VALIDITY};
pub use files::{write_private, write_private_bytes};
pub use kubeconfig::kubeconfig;
