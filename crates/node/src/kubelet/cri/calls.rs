//! The CRI calls, one method each, with the deadline and error mapping of [`super`].

use std::collections::HashMap;
use std::time::Duration;

use k8s_cri::v1 as cri;

use super::{CriClient, CriError, PULL_TIMEOUT, REQUEST_TIMEOUT, Result, request};

macro_rules! call {
    ($self:ident . $svc:ident . $method:ident ( $req:expr ), $op:literal, $timeout:expr) => {{
        let mut svc = $self.$svc.clone();
        svc.$method(request($req, $timeout))
            .await
            .map(|r| r.into_inner())
            .map_err(|s| CriError::from_status($op, s))
    }};
    ($self:ident . $svc:ident . $method:ident ( $req:expr ), $op:literal) => {
        call!($self.$svc.$method($req), $op, REQUEST_TIMEOUT)
    };
}

impl CriClient {
    /// The runtime's name and version (`containerd`, `v1.6.20`).
    pub async fn version(&self) -> Result<cri::VersionResponse> {
        call!(
            self.runtime.version(cri::VersionRequest {
                version: "v1".to_string()
            }),
            "Version"
        )
    }

    /// The runtime's conditions (`RuntimeReady`, `NetworkReady`).
    pub async fn status(&self) -> Result<cri::StatusResponse> {
        call!(
            self.runtime.status(cri::StatusRequest { verbose: false }),
            "Status"
        )
    }

    /// Like [`Self::status`] with a short deadline: a probe of whether the runtime answers.
    pub async fn ping(&self, timeout: Duration) -> Result<cri::StatusResponse> {
        call!(
            self.runtime.status(cri::StatusRequest { verbose: false }),
            "Status",
            timeout
        )
    }

    /// Sets the pod CIDR (CRI `UpdateRuntimeConfig`).
    pub async fn update_runtime_config(&self, pod_cidr: &str) -> Result<()> {
        call!(
            self.runtime
                .update_runtime_config(cri::UpdateRuntimeConfigRequest {
                    runtime_config: Some(cri::RuntimeConfig {
                        network_config: Some(cri::NetworkConfig {
                            pod_cidr: pod_cidr.to_string(),
                        }),
                    }),
                }),
            "UpdateRuntimeConfig"
        )
        .map(|_| ())
    }

    // --- images -------------------------------------------------------------------------

    pub async fn list_images(&self) -> Result<Vec<cri::Image>> {
        call!(
            self.images
                .list_images(cri::ListImagesRequest { filter: None }),
            "ListImages"
        )
        .map(|r| r.images)
    }

    /// The image `reference` names, or `None` when the runtime does not have it.
    pub async fn image_status(&self, reference: &str) -> Result<Option<cri::Image>> {
        call!(
            self.images.image_status(cri::ImageStatusRequest {
                image: Some(image_spec(reference)),
                verbose: false,
            }),
            "ImageStatus"
        )
        .map(|r| r.image)
    }

    /// Pulls `reference` (with `auth` when given); the image's ID (`sha256:...`).
    pub async fn pull_image(
        &self,
        reference: &str,
        auth: Option<cri::AuthConfig>,
        sandbox: Option<cri::PodSandboxConfig>,
    ) -> Result<String> {
        call!(
            self.images.pull_image(cri::PullImageRequest {
                image: Some(image_spec(reference)),
                auth,
                sandbox_config: sandbox,
            }),
            "PullImage",
            PULL_TIMEOUT
        )
        .map(|r| r.image_ref)
    }

    pub async fn remove_image(&self, reference: &str) -> Result<()> {
        call!(
            self.images.remove_image(cri::RemoveImageRequest {
                image: Some(image_spec(reference)),
            }),
            "RemoveImage"
        )
        .map(|_| ())
    }

    pub async fn image_fs_info(&self) -> Result<cri::ImageFsInfoResponse> {
        call!(
            self.images.image_fs_info(cri::ImageFsInfoRequest {}),
            "ImageFsInfo"
        )
    }

    // --- sandboxes ----------------------------------------------------------------------

    /// Creates and starts a sandbox; its ID.
    pub async fn run_pod_sandbox(&self, config: cri::PodSandboxConfig) -> Result<String> {
        call!(
            self.runtime.run_pod_sandbox(cri::RunPodSandboxRequest {
                config: Some(config),
                runtime_handler: String::new(),
            }),
            "RunPodSandbox"
        )
        .map(|r| r.pod_sandbox_id)
    }

    /// Stops a sandbox (its containers are killed, its network torn down). Idempotent.
    pub async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        call!(
            self.runtime.stop_pod_sandbox(cri::StopPodSandboxRequest {
                pod_sandbox_id: id.to_string()
            }),
            "StopPodSandbox"
        )
        .map(|_| ())
    }

    /// Removes a sandbox and its containers. Idempotent.
    pub async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        call!(
            self.runtime
                .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                    pod_sandbox_id: id.to_string()
                }),
            "RemovePodSandbox"
        )
        .map(|_| ())
    }

    pub async fn pod_sandbox_status(&self, id: &str) -> Result<cri::PodSandboxStatus> {
        call!(
            self.runtime
                .pod_sandbox_status(cri::PodSandboxStatusRequest {
                    pod_sandbox_id: id.to_string(),
                    verbose: false,
                }),
            "PodSandboxStatus"
        )?
        .status
        .ok_or_else(|| CriError::NotFound {
            op: "PodSandboxStatus",
            message: format!("sandbox {id} has no status"),
        })
    }

    pub async fn list_pod_sandboxes(&self) -> Result<Vec<cri::PodSandbox>> {
        call!(
            self.runtime
                .list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }),
            "ListPodSandbox"
        )
        .map(|r| r.items)
    }

    /// The sandboxes labelled as pod `uid`'s.
    pub async fn list_pod_sandboxes_of(&self, uid: &str) -> Result<Vec<cri::PodSandbox>> {
        call!(
            self.runtime.list_pod_sandbox(cri::ListPodSandboxRequest {
                filter: Some(cri::PodSandboxFilter {
                    label_selector: pod_selector(uid),
                    ..Default::default()
                }),
            }),
            "ListPodSandbox"
        )
        .map(|r| r.items)
    }

    // --- containers ---------------------------------------------------------------------

    /// The containers labelled as pod `uid`'s.
    pub async fn list_containers_of(&self, uid: &str) -> Result<Vec<cri::Container>> {
        call!(
            self.runtime.list_containers(cri::ListContainersRequest {
                filter: Some(cri::ContainerFilter {
                    label_selector: pod_selector(uid),
                    ..Default::default()
                }),
            }),
            "ListContainers"
        )
        .map(|r| r.containers)
    }

    /// Creates a container in a sandbox; its ID.
    pub async fn create_container(
        &self,
        sandbox_id: &str,
        config: cri::ContainerConfig,
        sandbox: cri::PodSandboxConfig,
    ) -> Result<String> {
        call!(
            self.runtime.create_container(cri::CreateContainerRequest {
                pod_sandbox_id: sandbox_id.to_string(),
                config: Some(config),
                sandbox_config: Some(sandbox),
            }),
            "CreateContainer"
        )
        .map(|r| r.container_id)
    }

    pub async fn start_container(&self, id: &str) -> Result<()> {
        call!(
            self.runtime.start_container(cri::StartContainerRequest {
                container_id: id.to_string()
            }),
            "StartContainer"
        )
        .map(|_| ())
    }

    /// Stops a container: its stop signal, then SIGKILL after `timeout`. Idempotent.
    pub async fn stop_container(&self, id: &str, timeout: Duration) -> Result<()> {
        let secs = timeout.as_secs() as i64;
        call!(
            self.runtime.stop_container(cri::StopContainerRequest {
                container_id: id.to_string(),
                timeout: secs,
            }),
            "StopContainer",
            REQUEST_TIMEOUT + timeout
        )
        .map(|_| ())
    }

    pub async fn remove_container(&self, id: &str) -> Result<()> {
        call!(
            self.runtime.remove_container(cri::RemoveContainerRequest {
                container_id: id.to_string()
            }),
            "RemoveContainer"
        )
        .map(|_| ())
    }

    pub async fn list_containers(&self) -> Result<Vec<cri::Container>> {
        call!(
            self.runtime
                .list_containers(cri::ListContainersRequest { filter: None }),
            "ListContainers"
        )
        .map(|r| r.containers)
    }

    pub async fn container_status(&self, id: &str) -> Result<cri::ContainerStatus> {
        call!(
            self.runtime.container_status(cri::ContainerStatusRequest {
                container_id: id.to_string(),
                verbose: false,
            }),
            "ContainerStatus"
        )?
        .status
        .ok_or_else(|| CriError::NotFound {
            op: "ContainerStatus",
            message: format!("container {id} has no status"),
        })
    }

    /// Runs `cmd` in a container and waits for it (at most `timeout`; zero means none).
    pub async fn exec_sync(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<cri::ExecSyncResponse> {
        let deadline = if timeout.is_zero() {
            REQUEST_TIMEOUT
        } else {
            timeout + Duration::from_secs(2)
        };
        call!(
            self.runtime.exec_sync(cri::ExecSyncRequest {
                container_id: id.to_string(),
                cmd,
                timeout: timeout.as_secs() as i64,
            }),
            "ExecSync",
            deadline
        )
    }

    /// A streaming URL for an exec session.
    pub async fn exec(&self, req: cri::ExecRequest) -> Result<String> {
        call!(self.runtime.exec(req), "Exec").map(|r| r.url)
    }

    /// A streaming URL for an attach session.
    pub async fn attach(&self, req: cri::AttachRequest) -> Result<String> {
        call!(self.runtime.attach(req), "Attach").map(|r| r.url)
    }

    /// A streaming URL for port forwarding into a sandbox.
    pub async fn port_forward(&self, sandbox_id: &str, ports: Vec<i32>) -> Result<String> {
        call!(
            self.runtime.port_forward(cri::PortForwardRequest {
                pod_sandbox_id: sandbox_id.to_string(),
                port: ports,
            }),
            "PortForward"
        )
        .map(|r| r.url)
    }

    /// Asks the runtime to reopen a container's log file (after rotation).
    pub async fn reopen_container_log(&self, id: &str) -> Result<()> {
        call!(
            self.runtime
                .reopen_container_log(cri::ReopenContainerLogRequest {
                    container_id: id.to_string()
                }),
            "ReopenContainerLog"
        )
        .map(|_| ())
    }

    // --- stats --------------------------------------------------------------------------

    pub async fn list_container_stats(&self) -> Result<Vec<cri::ContainerStats>> {
        call!(
            self.runtime
                .list_container_stats(cri::ListContainerStatsRequest { filter: None }),
            "ListContainerStats"
        )
        .map(|r| r.stats)
    }

    pub async fn list_pod_sandbox_stats(&self) -> Result<Vec<cri::PodSandboxStats>> {
        call!(
            self.runtime
                .list_pod_sandbox_stats(cri::ListPodSandboxStatsRequest { filter: None }),
            "ListPodSandboxStats"
        )
        .map(|r| r.stats)
    }
}

fn pod_selector(uid: &str) -> HashMap<String, String> {
    HashMap::from([(crate::kubelet::labels::POD_UID.to_string(), uid.to_string())])
}

fn image_spec(reference: &str) -> cri::ImageSpec {
    cri::ImageSpec {
        image: reference.to_string(),
        annotations: HashMap::new(),
        ..cri::ImageSpec::default()
    }
}
