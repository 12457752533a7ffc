//! The test images (busybox, mtest, pause) from the `testimages` crate, built by the tests
//! themselves (nothing reaches a registry), imported into the test's containerd with `ctr`.

use std::path::PathBuf;

/// The busybox image tests run.
pub const BUSYBOX: &str = testimages::BUSYBOX;
/// The project's test program (HTTP server, exit codes, memory hog, probes).
pub const MTEST: &str = testimages::MTEST;
/// The pause image the test containerd is configured with.
pub const PAUSE: &str = testimages::PAUSE;

/// The archives a test node preloads.
pub fn test_images() -> Vec<PathBuf> {
    [
        testimages::busybox(),
        testimages::mtest(),
        testimages::pause(),
    ]
    .into_iter()
    .map(|a| a.expect("the test images build").path.clone())
    .collect()
}
