"""--api-key (or SPILLWAY_API_KEY): /v1/*, /tokenize and /detokenize answer 401 without the
key or with a wrong one; /health, /live and /metrics stay open."""
import json

from spillway_e2e import Server, ServerTestCase, chat_body, main


class ApiKey(ServerTestCase):
    SERVER_ARGS = ("--api-key", "sekrit-key")

    def test_v1_routes_need_the_key(self):
        for method, path, body in (("GET", "/v1/models", None),
                                   ("POST", "/v1/chat/completions", chat_body("x", max_tokens=2)),
                                   ("POST", "/v1/completions", {"model": "stories260K", "prompt": "x"}),
                                   ("POST", "/tokenize", {"prompt": "x"}),
                                   ("POST", "/detokenize", {"tokens": [1]}),
                                   ("GET", "/v1/unknown", None)):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekrit-key"}):
                with self.subTest(path=path, headers=headers):
                    status, hdrs, payload = self.server.request(method, path, body=body, headers=headers)
                    self.assertEqual(status, 401)
                    err = json.loads(payload)["error"]
                    self.assertEqual(err["type"], "authentication_error")
                    self.assertEqual(err["code"], "invalid_api_key")

    def test_the_key_opens_them(self):
        auth = {"Authorization": "Bearer sekrit-key"}
        status, _, _ = self.server.request("GET", "/v1/models", headers=auth)
        self.assertEqual(status, 200)
        status, _, body = self.server.post_json("/v1/chat/completions", chat_body("x", max_tokens=2), headers=auth)
        self.assertEqual(status, 200, body)

    def test_probes_and_metrics_stay_open(self):
        for path in ("/health", "/live", "/metrics"):
            status, _, _ = self.server.request("GET", path)
            self.assertEqual(status, 200, path)


class ApiKeyFromEnvironment(ServerTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(env={"SPILLWAY_API_KEY": "from-env"}).wait_ready()

    def test_env_var_sets_the_key(self):
        status, _, _ = self.server.request("GET", "/v1/models")
        self.assertEqual(status, 401)
        status, _, _ = self.server.request("GET", "/v1/models", headers={"Authorization": "Bearer from-env"})
        self.assertEqual(status, 200)


if __name__ == "__main__":
    main()
