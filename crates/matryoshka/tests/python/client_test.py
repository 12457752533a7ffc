"""The Python `kubernetes` client against a real `matryoshka up`.

Run by `crates/matryoshka/tests/python_client.rs` with KUBECONFIG pointing at the server's
admin.conf. Each test works in a namespace of its own.
"""

import os
import threading
import unittest
import uuid

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def setUpModule():
    config.load_kube_config(config_file=os.environ["KUBECONFIG"])


class Base(unittest.TestCase):
    def setUp(self):
        self.core = client.CoreV1Api()
        self.apps = client.AppsV1Api()
        self.ns = "py-" + uuid.uuid4().hex[:8]
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=self.ns)))

    def cm(self, name, data=None, labels=None):
        return client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, labels=labels), data=data or {"k": "v"}
        )

    def deployment(self, name, replicas=1, image="nginx:1.25"):
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": image}]},
                },
            },
        }


class VersionAndDiscovery(unittest.TestCase):
    def test_version_answers_with_a_trailing_slash(self):
        info = client.VersionApi().get_code()
        self.assertEqual(info.major, "1")
        self.assertTrue(info.git_version.startswith("v1."))

    def test_the_dynamic_client_discovers_and_lists(self):
        from kubernetes import dynamic

        dyn = dynamic.DynamicClient(client.ApiClient())
        deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
        self.assertIsNotNone(deployments.get())


class Crud(Base):
    def test_create_read_replace_delete_round_trip(self):
        created = self.core.create_namespaced_config_map(self.ns, self.cm("a", {"x": "1"}))
        self.assertTrue(created.metadata.uid)
        self.assertTrue(created.metadata.resource_version.isdigit())
        self.assertIsNotNone(created.metadata.creation_timestamp)
        got = self.core.read_namespaced_config_map("a", self.ns)
        self.assertEqual(got.data, {"x": "1"})
        got.data["x"] = "2"
        replaced = self.core.replace_namespaced_config_map("a", self.ns, got)
        self.assertEqual(replaced.data, {"x": "2"})
        self.assertGreater(int(replaced.metadata.resource_version), int(created.metadata.resource_version))
        self.core.delete_namespaced_config_map("a", self.ns)
        with self.assertRaises(ApiException) as e:
            self.core.read_namespaced_config_map("a", self.ns)
        self.assertEqual(e.exception.status, 404)

    def test_generate_name_appends_five_characters(self):
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="gen-"), data={"a": "b"})
        made = self.core.create_namespaced_config_map(self.ns, body)
        self.assertTrue(made.metadata.name.startswith("gen-"))
        self.assertEqual(len(made.metadata.name), len("gen-") + 5)

    def test_label_selectors_filter_lists(self):
        self.core.create_namespaced_config_map(self.ns, self.cm("red", labels={"color": "red", "size": "s"}))
        self.core.create_namespaced_config_map(self.ns, self.cm("blue", labels={"color": "blue"}))
        self.core.create_namespaced_config_map(self.ns, self.cm("plain"))

        def names(selector):
            items = self.core.list_namespaced_config_map(self.ns, label_selector=selector).items
            # kube-root-ca.crt is published into every namespace by the root CA publisher.
            return sorted(i.metadata.name for i in items if i.metadata.name != "kube-root-ca.crt")

        self.assertEqual(names("color=red"), ["red"])
        self.assertEqual(names("color!=red"), ["blue", "plain"])
        self.assertEqual(names("color in (red,blue)"), ["blue", "red"])
        self.assertEqual(names("color notin (red)"), ["blue", "plain"])
        self.assertEqual(names("size"), ["red"])
        self.assertEqual(names("!color"), ["plain"])
        with self.assertRaises(ApiException) as e:
            names("color in (")
        self.assertEqual(e.exception.status, 400)

    def test_pagination_returns_every_item_exactly_once(self):
        for i in range(25):
            self.core.create_namespaced_config_map(self.ns, self.cm(f"page-{i:02d}"))
        seen = []
        token = None
        pages = 0
        while True:
            page = self.core.list_namespaced_config_map(self.ns, limit=10, _continue=token)
            seen.extend(i.metadata.name for i in page.items)
            pages += 1
            token = page.metadata._continue
            if not token:
                break
        names = [n for n in seen if n.startswith("page-")]
        self.assertEqual(sorted(names), [f"page-{i:02d}" for i in range(25)])
        self.assertEqual(len(set(seen)), len(seen))
        self.assertGreaterEqual(pages, 3)


class Patches(Base):
    def test_strategic_merge_patch_merges_containers_by_name(self):
        self.apps.create_namespaced_deployment(self.ns, self.deployment("web"))
        patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:1.26"}]}}}}
        out = self.apps.patch_namespaced_deployment("web", self.ns, patch)
        containers = out.spec.template.spec.containers
        self.assertEqual([(c.name, c.image) for c in containers], [("main", "nginx:1.26")])

    def test_json_patch_is_sent_as_a_list(self):
        self.apps.create_namespaced_deployment(self.ns, self.deployment("web"))
        out = self.apps.patch_namespaced_deployment(
            "web", self.ns, [{"op": "replace", "path": "/spec/replicas", "value": 3}]
        )
        self.assertEqual(out.spec.replicas, 3)

    def test_merge_patch_with_an_explicit_content_type(self):
        self.core.create_namespaced_config_map(self.ns, self.cm("m", {"a": "1", "b": "2"}))
        out = self.core.patch_namespaced_config_map(
            "m", self.ns, {"data": {"a": None, "c": "3"}}, _content_type="application/merge-patch+json"
        )
        self.assertEqual(out.data, {"b": "2", "c": "3"})

    def test_server_side_apply_creates_then_updates(self):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}}
        out = self.core.patch_namespaced_config_map(
            "ssa", self.ns, body, field_manager="py", _content_type="application/apply-patch+yaml"
        )
        self.assertEqual(out.data, {"a": "1"})
        self.assertEqual([m.manager for m in out.metadata.managed_fields], ["py"])
        body["data"] = {"a": "2"}
        out = self.core.patch_namespaced_config_map(
            "ssa", self.ns, body, field_manager="py", _content_type="application/apply-patch+yaml"
        )
        self.assertEqual(out.data, {"a": "2"})

    def test_scale_reads_and_writes_replicas(self):
        self.apps.create_namespaced_deployment(self.ns, self.deployment("web", replicas=2))
        scale = self.apps.read_namespaced_deployment_scale("web", self.ns)
        self.assertEqual(scale.spec.replicas, 2)
        self.assertEqual(scale.status.selector, "app=web")
        self.apps.patch_namespaced_deployment_scale("web", self.ns, {"spec": {"replicas": 5}})
        self.assertEqual(self.apps.read_namespaced_deployment("web", self.ns).spec.replicas, 5)


class Watch(Base):
    def test_watch_sees_added_modified_deleted_in_order(self):
        # A sentinel that exists before the watch: its synthetic ADDED event proves the watch
        # is established before the writes under test begin.
        self.core.create_namespaced_config_map(self.ns, self.cm("sentinel"))
        events = []
        ready = threading.Event()

        def run():
            w = watch.Watch()
            for ev in w.stream(self.core.list_namespaced_config_map, self.ns, timeout_seconds=20):
                name = ev["object"].metadata.name
                if name not in ("sentinel", "watched"):
                    continue  # e.g. kube-root-ca.crt, published by a controller
                if name == "sentinel":
                    ready.set()
                    continue
                events.append((ev["type"], name))
                if ev["type"] == "DELETED":
                    w.stop()

        t = threading.Thread(target=run)
        t.start()
        self.assertTrue(ready.wait(timeout=20))
        self.core.create_namespaced_config_map(self.ns, self.cm("watched"))
        self.core.patch_namespaced_config_map("watched", self.ns, {"data": {"k": "w"}})
        self.core.delete_namespaced_config_map("watched", self.ns)
        t.join(timeout=30)
        self.assertEqual(events, [("ADDED", "watched"), ("MODIFIED", "watched"), ("DELETED", "watched")])


class Errors(Base):
    def test_error_codes_and_reasons_follow_upstream(self):
        with self.assertRaises(ApiException) as e:
            self.core.read_namespaced_config_map("nope", self.ns)
        self.assertEqual(e.exception.status, 404)
        self.assertIn('"reason":"NotFound"', e.exception.body.replace(" ", ""))

        self.core.create_namespaced_config_map(self.ns, self.cm("dup"))
        with self.assertRaises(ApiException) as e:
            self.core.create_namespaced_config_map(self.ns, self.cm("dup"))
        self.assertEqual(e.exception.status, 409)
        self.assertIn("AlreadyExists", e.exception.body)

        stale = self.core.read_namespaced_config_map("dup", self.ns)
        self.core.patch_namespaced_config_map("dup", self.ns, {"data": {"k": "newer"}})
        with self.assertRaises(ApiException) as e:
            self.core.replace_namespaced_config_map("dup", self.ns, stale)
        self.assertEqual(e.exception.status, 409)
        self.assertIn("Conflict", e.exception.body)

        with self.assertRaises(ApiException) as e:
            self.core.create_namespaced_config_map(self.ns, self.cm("Not_Valid"))
        self.assertEqual(e.exception.status, 422)
        self.assertIn("metadata.name", e.exception.body)

        with self.assertRaises(ApiException) as e:
            self.core.create_namespaced_config_map("no-such-namespace", self.cm("x"))
        self.assertEqual(e.exception.status, 404)


if __name__ == "__main__":
    unittest.main()
