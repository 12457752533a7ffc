"""The Python client's streaming against an in-process API server and a fake node (driven
by tests/kubelet_python.rs): stream() exec with stdout, stderr and the return code, with
stdin, and portforward() to a pod port."""

import os
import unittest

from kubernetes import client, config
from kubernetes.stream import portforward, stream


class StreamTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        config.load_kube_config(config_file=os.environ["KUBECONFIG"])
        cls.v1 = client.CoreV1Api()

    def exec(self, command, **kw):
        return stream(
            self.v1.connect_get_namespaced_pod_exec,
            "shell",
            "default",
            command=command,
            stderr=True,
            stdout=True,
            _preload_content=False,
            **kw,
        )

    def test_exec_returns_output_and_the_exit_code(self):
        resp = self.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], stdin=False, tty=False)
        resp.run_forever(timeout=20)
        self.assertEqual(resp.read_stdout(), "out\n")
        self.assertEqual(resp.read_stderr(), "err\n")
        self.assertEqual(resp.returncode, 3)
        resp.close()

    def test_a_successful_exec_returns_zero_and_preloads_output(self):
        out = stream(
            self.v1.connect_get_namespaced_pod_exec,
            "shell",
            "default",
            command=["sh", "-c", "echo hello"],
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
        )
        self.assertEqual(out, "hello\n")
        resp = self.exec(["true"], stdin=False, tty=False)
        resp.run_forever(timeout=20)
        self.assertEqual(resp.returncode, 0)
        resp.close()

    def test_exec_reads_stdin(self):
        resp = self.exec(["head", "-n", "1"], stdin=True, tty=False)
        resp.write_stdin("line from python\n")
        resp.run_forever(timeout=20)
        self.assertEqual(resp.read_stdout(), "line from python\n")
        self.assertEqual(resp.returncode, 0)
        resp.close()

    def test_portforward_reaches_the_pod(self):
        port = int(os.environ["POD_PORT"])
        pf = portforward(
            self.v1.connect_get_namespaced_pod_portforward, "web", "default", ports=str(port)
        )
        sock = pf.socket(port)
        sock.setblocking(True)
        sock.sendall(b"GET / HTTP/1.1\r\nhost: pod\r\nconnection: close\r\n\r\n")
        reply = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
        sock.close()
        self.assertTrue(reply.startswith(b"HTTP/1.1 200 OK"), reply)
        self.assertTrue(reply.endswith(b"hello from the pod"), reply)
        self.assertIsNone(pf.error(port))
        pf.close()


if __name__ == "__main__":
    unittest.main()
