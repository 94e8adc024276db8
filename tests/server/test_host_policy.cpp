// HostPolicy: the DNS-rebinding defence (server/http/host_policy.h).
#include <gtest/gtest.h>

#include "server/http/host_policy.h"

namespace spillway::server {
namespace {

TEST(HostPolicy, LoopbackListenerAnswersOnlyLocalNames) {
  for (const char* listen : {"127.0.0.1", "::1", "localhost", "127.0.0.53"}) {
    SCOPED_TRACE(listen);
    const HostPolicy p = HostPolicy::for_listener(listen, {});
    EXPECT_TRUE(p.allows("127.0.0.1:8080"));
    EXPECT_TRUE(p.allows("localhost"));
    EXPECT_TRUE(p.allows("LocalHost:80"));
    EXPECT_TRUE(p.allows("localhost.:80"));
    EXPECT_TRUE(p.allows("app.localhost:3000"));
    EXPECT_TRUE(p.allows("[::1]:8080"));
    EXPECT_TRUE(p.allows("10.1.2.3"));
    EXPECT_TRUE(p.allows(""));  // HTTP/1.0 without Host
    EXPECT_FALSE(p.allows("evil.example"));
    EXPECT_FALSE(p.allows("evil.example:8080"));
    EXPECT_FALSE(p.allows("localhost.evil.example"));
    EXPECT_FALSE(p.allows("127.0.0.1.evil.example"));
    EXPECT_FALSE(p.allows("[::1"));
  }
}

TEST(HostPolicy, OtherListenersAnswerEveryHostUnlessAllowedHostsGiven) {
  EXPECT_TRUE(HostPolicy::for_listener("0.0.0.0", {}).allows("spillway.default.svc.cluster.local"));
  EXPECT_TRUE(HostPolicy::for_listener("::", {}).allows("anything"));
  const HostPolicy p = HostPolicy::for_listener("0.0.0.0", {"api.example.com", ".internal"});
  EXPECT_TRUE(p.allows("API.example.com:443"));
  EXPECT_TRUE(p.allows("svc.internal"));
  EXPECT_TRUE(p.allows("internal"));
  EXPECT_TRUE(p.allows("10.0.0.7:8080"));  // pod IPs: probes
  EXPECT_FALSE(p.allows("other.example.com"));
  EXPECT_FALSE(p.allows("xinternal"));
}

TEST(HostPolicy, StarAllowsEverything) {
  EXPECT_TRUE(HostPolicy::for_listener("127.0.0.1", {"*"}).allows("evil.example"));
}

TEST(HostPolicy, AllowedHostsExtendLoopback) {
  const HostPolicy p = HostPolicy::for_listener("127.0.0.1", {"my-laptop"});
  EXPECT_TRUE(p.allows("my-laptop:8080"));
  EXPECT_FALSE(p.allows("evil.example"));
}

}  // namespace
}  // namespace spillway::server
