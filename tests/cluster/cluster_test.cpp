// Specification of the cluster layer: routes, transfer times, presets, the JSON format and the
// errors bad input gets.
#include "placer/cluster/cluster.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kGB = 1e9;
constexpr double kUs = 1e-6;

// The message of the Error `f` throws; a test failure when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a placer::Error";
  return "";
}

Device gpu(std::string name, double flops = 10e12) {
  return Device{std::move(name), DeviceKind::gpu, "test GPU", flops, 500 * kGB, 16ull << 30, 10 * kUs, 1};
}

Device cpu(std::string name) {
  return Device{std::move(name), DeviceKind::cpu, "test CPU", 1e12, 100 * kGB, 64ull << 30, 5 * kUs, 1};
}

Link link(std::string a, std::string b, double bw, double latency_s, std::string name = "") {
  return Link{std::move(name), std::move(a), std::move(b), bw, bw, latency_s};
}

// cpu:0 -- root -- pcie0 -- gpu:0
//                       \-- gpu:1      (links 0..3 in this order)
Cluster two_gpus_behind_a_switch() {
  return Cluster::build("two-gpus", {cpu("cpu:0"), gpu("gpu:0"), gpu("gpu:1")}, {"root", "pcie0"},
                        {link("cpu:0", "root", 50 * kGB, 0), link("root", "pcie0", 12 * kGB, 3 * kUs),
                         link("pcie0", "gpu:0", 10 * kGB, 2 * kUs), link("pcie0", "gpu:1", 8 * kGB, 4 * kUs)});
}

std::vector<std::string> channel_names(const Cluster& c, DeviceId from, DeviceId to) {
  std::vector<std::string> names;
  for (ChannelId ch : c.route(from, to)) names.push_back(c.channel_name(ch));
  return names;
}

std::string write_temp_file(const std::string& name, const std::string& text) {
  const std::string path = test::temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// ---- Routes -------------------------------------------------------------------------------------

TEST(ClusterRoutes, TwoGpusBehindOneSwitchTalkThroughIt) {
  const Cluster c = two_gpus_behind_a_switch();
  const DeviceId g0 = c.device_id("gpu:0"), g1 = c.device_id("gpu:1");
  EXPECT_THAT(channel_names(c, g0, g1), ElementsAre("gpu:0->pcie0", "pcie0->gpu:1"));
  EXPECT_THAT(c.route(g0, g1), ElementsAre(2 * 2 + 1, 3 * 2 + 0));  // link 2 b->a, link 3 a->b
  EXPECT_EQ(c.route_description(g0, g1), "gpu:0 -> pcie0 -> gpu:1");
}

TEST(ClusterRoutes, TwoHopTransferIsLatencySumPlusBytesOverBottleneck) {
  const Cluster c = two_gpus_behind_a_switch();
  const DeviceId g0 = c.device_id("gpu:0"), g1 = c.device_id("gpu:1");
  EXPECT_DOUBLE_EQ(c.route_latency_s(g0, g1), 6 * kUs);
  EXPECT_DOUBLE_EQ(c.route_bandwidth(g0, g1), 8 * kGB);
  EXPECT_DOUBLE_EQ(c.transfer_time_s(g0, g1, 4e6), 6 * kUs + 4e6 / (8 * kGB));
}

TEST(ClusterRoutes, HostToGpuCrossesRootAndSwitch) {
  const Cluster c = two_gpus_behind_a_switch();
  const DeviceId host = c.device_id("cpu:0"), g0 = c.device_id("gpu:0");
  EXPECT_THAT(channel_names(c, host, g0), ElementsAre("cpu:0->root", "root->pcie0", "pcie0->gpu:0"));
  EXPECT_THAT(channel_names(c, g0, host), ElementsAre("gpu:0->pcie0", "pcie0->root", "root->cpu:0"));
  EXPECT_DOUBLE_EQ(c.transfer_time_s(host, g0, 1e9), 5 * kUs + 1e9 / (10 * kGB));
}

TEST(ClusterRoutes, ChannelIdsAreLinkTimesTwoPlusDirection) {
  const Cluster c = two_gpus_behind_a_switch();
  ASSERT_EQ(c.num_links(), 4u);
  ASSERT_EQ(c.num_channels(), 8u);
  EXPECT_EQ(c.channel_name(2 * 1 + 0), "root->pcie0");
  EXPECT_EQ(c.channel_name(2 * 1 + 1), "pcie0->root");
  EXPECT_EQ(c.channel_source(3), "pcie0");
  EXPECT_EQ(c.channel_target(3), "root");
  EXPECT_EQ(c.channel_link(3), 1u);
  EXPECT_DOUBLE_EQ(c.channel_latency_s(3), 3 * kUs);
}

TEST(ClusterRoutes, SameDeviceHasEmptyRouteAndFreeTransfer) {
  const Cluster c = two_gpus_behind_a_switch();
  EXPECT_TRUE(c.route(1, 1).empty());
  EXPECT_EQ(c.route_latency_s(1, 1), 0.0);
  EXPECT_EQ(c.route_bandwidth(1, 1), std::numeric_limits<double>::infinity());
  EXPECT_EQ(c.transfer_time_s(1, 1, 1e9), 0.0);
}

TEST(ClusterRoutes, AsymmetricLinkHasOneBandwidthPerDirection) {
  const Cluster c = Cluster::build("asym", {cpu("cpu:0"), gpu("gpu:0")}, {},
                                   {Link{"pcie", "cpu:0", "gpu:0", 16 * kGB, 11 * kGB, 20 * kUs}});
  const DeviceId host = 0, dev = 1;
  EXPECT_DOUBLE_EQ(c.channel_bandwidth(0), 16 * kGB);
  EXPECT_DOUBLE_EQ(c.channel_bandwidth(1), 11 * kGB);
  EXPECT_DOUBLE_EQ(c.transfer_time_s(host, dev, 1.6e9), 20 * kUs + 0.1);
  EXPECT_DOUBLE_EQ(c.transfer_time_s(dev, host, 1.1e9), 20 * kUs + 0.1);
}

TEST(ClusterRoutes, FastTwoHopPathBeatsSlowDirectLink) {
  // Direct: 1 GB/s (1 MiB probe: ~1049 us). Via the switch: two 100 GB/s hops of 5 us (~31 us).
  const Cluster c = Cluster::build("fast", {gpu("gpu:0"), gpu("gpu:1")}, {"sw"},
                                   {link("gpu:0", "gpu:1", 1 * kGB, 0), link("gpu:0", "sw", 100 * kGB, 5 * kUs),
                                    link("sw", "gpu:1", 100 * kGB, 5 * kUs)});
  EXPECT_THAT(channel_names(c, 0, 1), ElementsAre("gpu:0->sw", "sw->gpu:1"));
}

// Found by an audit: routes were chosen as if each hop were crossed in turn (the sum of each hop's
// latency + 1 MiB / bandwidth) but priced cut-through, so a slow direct link beat a faster path of
// three hops: a 4 MiB transfer took 2.1 ms where the other path would take 0.84 ms.
TEST(ClusterRoutes, RoutesAreChosenByTheCutThroughTimeTheyArePricedAt) {
  for (const double hop_latency : {0.0, 200 * kUs}) {
    const Cluster c = Cluster::build("fabric", {gpu("gpu:0"), gpu("gpu:1")}, {"s1", "s2"},
                                     {link("gpu:0", "gpu:1", 2 * kGB, 0), link("gpu:0", "s1", 5 * kGB, hop_latency),
                                      link("s1", "s2", 5 * kGB, hop_latency), link("s2", "gpu:1", 5 * kGB, hop_latency)});
    const double mib = 1024.0 * 1024.0;
    if (hop_latency == 0.0) {
      // 1 MiB: 210 us over the switches against 524 us direct (as hops crossed in turn: 629 us).
      EXPECT_THAT(channel_names(c, 0, 1), ElementsAre("gpu:0->s1", "s1->s2", "s2->gpu:1"));
      EXPECT_DOUBLE_EQ(c.transfer_time_s(0, 1, 4 * mib), 4 * mib / (5 * kGB));
    } else {
      // Three latencies of 200 us: 810 us over the switches, the direct link wins.
      EXPECT_THAT(channel_names(c, 0, 1), ElementsAre("gpu:0->gpu:1"));
    }
  }
  // Neither the path of least latency nor that of most bandwidth: three ways from gpu:0 to gpu:1
  // (latency, bandwidth): direct (0, 1 GB/s), via a (100 us, 100 GB/s), via b (20 us, 20 GB/s);
  // for 1 MiB: 1049, 110.5 and 72.4 us. (Hops crossed in turn, via a came first: 121 us against
  // 124.9 us.)
  const Cluster three = Cluster::build("three", {gpu("gpu:0"), gpu("gpu:1")}, {"a", "b"},
                                       {link("gpu:0", "gpu:1", 1 * kGB, 0), link("gpu:0", "a", 100 * kGB, 50 * kUs),
                                        link("a", "gpu:1", 100 * kGB, 50 * kUs), link("gpu:0", "b", 20 * kGB, 10 * kUs),
                                        link("b", "gpu:1", 20 * kGB, 10 * kUs)});
  EXPECT_THAT(channel_names(three, 0, 1), ElementsAre("gpu:0->b", "b->gpu:1"));
  EXPECT_THAT(channel_names(three, 1, 0), ElementsAre("gpu:1->b", "b->gpu:0"));
}

TEST(ClusterRoutes, SlowHopsKeepTheirOrderWhateverTheirSize) {
  // Two one-switch paths of hops costing hours (bandwidths written in GB/s instead of bytes/s):
  // the faster path wins whichever is listed first, as for ordinary figures.
  for (const bool slow_first : {true, false}) {
    std::vector<Link> slow{link("gpu:0", "slow", 100, 0), link("slow", "gpu:1", 100, 0)};
    std::vector<Link> fast{link("gpu:0", "fast", 1000, 0), link("fast", "gpu:1", 1000, 0)};
    std::vector<Link> links = slow_first ? slow : fast;
    for (const Link& l : slow_first ? fast : slow) links.push_back(l);
    const Cluster c = Cluster::build("slow", {gpu("gpu:0"), gpu("gpu:1")}, {"slow", "fast"}, links);
    EXPECT_THAT(channel_names(c, 0, 1), ElementsAre("gpu:0->fast", "fast->gpu:1")) << "slow path listed first: " << slow_first;
  }
  // Hops from picoseconds to 1e300 s in one cluster still rank by cost.
  const Cluster wide = Cluster::build("wide", {gpu("gpu:0"), gpu("gpu:1")}, {"a", "b"},
                                      {link("gpu:0", "a", 1e-290, 0), link("a", "gpu:1", 1e20, 0),
                                       link("gpu:0", "b", 1e-280, 0), link("b", "gpu:1", 1e20, 0)});
  EXPECT_THAT(channel_names(wide, 0, 1), ElementsAre("gpu:0->b", "b->gpu:1"));
}

TEST(ClusterRoutes, EqualPathsTieOnFewerHopsThenLowerChannel) {
  // Two equal one-switch paths: the one through the lower channel id (sw-a, links 0 and 1) wins.
  const Cluster equal = Cluster::build(
      "tie", {gpu("gpu:0"), gpu("gpu:1")}, {"sw-a", "sw-b"},
      {link("gpu:0", "sw-a", 10 * kGB, 1 * kUs), link("sw-a", "gpu:1", 10 * kGB, 1 * kUs),
       link("gpu:0", "sw-b", 10 * kGB, 1 * kUs), link("sw-b", "gpu:1", 10 * kGB, 1 * kUs)});
  EXPECT_THAT(channel_names(equal, 0, 1), ElementsAre("gpu:0->sw-a", "sw-a->gpu:1"));
  EXPECT_THAT(channel_names(equal, 1, 0), ElementsAre("gpu:1->sw-a", "sw-a->gpu:0"));
  // Same cost (bandwidth so high the probe adds nothing) in two hops or three: two hops win.
  const Cluster hops = Cluster::build(
      "hops", {gpu("gpu:0"), gpu("gpu:1")}, {"s1", "s2", "s3"},
      {link("gpu:0", "s1", 1e20, 1 * kUs), link("s1", "s2", 1e20, 1 * kUs), link("s2", "gpu:1", 1e20, 1 * kUs),
       link("gpu:0", "s3", 1e20, 1.5 * kUs), link("s3", "gpu:1", 1e20, 1.5 * kUs)});
  EXPECT_THAT(channel_names(hops, 0, 1), ElementsAre("gpu:0->s3", "s3->gpu:1"));
}

// Found by a QA pass: costs rounded hop by hop broke exact ties, and one absurd link that no route
// takes made every other hop round to nothing.
TEST(ClusterRoutes, EqualCostsTieWhateverTheRoundingAndAbsurdLinksElsewhereChangeNothing) {
  // 1 MiB over 1.5 GB/s is 1 MiB over 3 GB/s plus two latencies of 1 MiB over 6 GB/s, whatever
  // the rounding of each: the direct link, one hop, wins the tie.
  constexpr double kMiB = 1024.0 * 1024.0;
  const Cluster tie = Cluster::build("tie", {gpu("gpu:0"), gpu("gpu:1")}, {"sw"},
                                     {link("gpu:0", "gpu:1", 1.5e9, 0), link("gpu:0", "sw", 3e9, kMiB / 6e9), link("sw", "gpu:1", 3e9, kMiB / 6e9)});
  EXPECT_THAT(channel_names(tie, 0, 1), ElementsAre("gpu:0->gpu:1"));
  // A link 10,000 times slower than the switch path stays unused beside a spare link of absurd
  // bandwidth (a unit slip) that joins a third GPU to a switch of its own.
  for (const bool spare : {false, true}) {
    std::vector<Link> links{link("gpu:0", "gpu:1", 1e6, 0), link("gpu:0", "sw", 1e10, 0), link("sw", "gpu:1", 1e10, 0),
                            link("gpu:2", "sw", 1e10, 0)};
    if (spare) links.push_back(link("gpu:2", "spare", 1e-280, 0));
    const Cluster c = Cluster::build("spare", {gpu("gpu:0"), gpu("gpu:1"), gpu("gpu:2")}, {"sw", "spare"}, links);
    EXPECT_THAT(channel_names(c, 0, 1), ElementsAre("gpu:0->sw", "sw->gpu:1")) << "spare link: " << spare;
  }
  // A tie found after the device was reached still wins on fewer hops: the two-hop path's last
  // switch comes after the device in cost order when its last hop costs next to nothing (a review).
  const Cluster late = Cluster::build("late", {gpu("gpu:0"), gpu("gpu:1")}, {"s1", "s2", "s3"},
                                      {link("gpu:0", "s1", 1e30, 1e-4), link("s1", "s2", 1e30, 1e-4), link("s2", "gpu:1", 1e30, 1e-4),
                                       link("gpu:0", "s3", 1e30, 3e-4 * (1 + 4e-10)), link("s3", "gpu:1", 1e30, 0)});
  EXPECT_THAT(channel_names(late, 0, 1), ElementsAre("gpu:0->s3", "s3->gpu:1"));
  // The latency of a link nothing takes changes no route (it did through the unit it set).
  for (const double latency : {0.0, 2.0, 123.456, 1e6}) {
    const Cluster c = Cluster::build("far", {gpu("gpu:0"), gpu("gpu:1"), gpu("gpu:9")}, {"sw"},
                                     {link("gpu:0", "sw", 2e9, 0), link("sw", "gpu:1", 2e9, 0), link("gpu:0", "gpu:1", 4e9, 0),
                                      link("gpu:9", "sw", 1e9, latency)});
    EXPECT_THAT(channel_names(c, 0, 1), ElementsAre("gpu:0->gpu:1")) << "latency " << latency;
  }
}

// A path of fewer hops is kept beside one of near-equal latency and more bandwidth, since the two
// may tie for 1 MiB, which fewer hops win: the direct link below ties with two hops through s1,
// and a switch s2 whose links no route takes moved both directions onto s1 (a review).
TEST(ClusterRoutes, ALinkNoRouteTakesChangesNoTie) {
  for (const bool with_s2 : {false, true}) {
    std::vector<Link> links{link("gpu:0", "gpu:1", 10 * kGB, 10 * kUs), link("gpu:0", "s1", 9129356699.077814, 0),
                            link("s1", "gpu:1", 9129356699.077814, 0)};
    if (with_s2) links.push_back(link("gpu:0", "s2", 10000000000.0001, 5 * kUs)), links.push_back(link("s2", "gpu:1", 10000000000.0001, 5.000000005e-06));
    const Cluster c = Cluster::build("unused", {gpu("gpu:0"), gpu("gpu:1")}, {"s1", "s2"}, links);
    EXPECT_THAT(channel_names(c, 0, 1), ElementsAre("gpu:0->gpu:1")) << "with s2: " << with_s2;
    EXPECT_THAT(channel_names(c, 1, 0), ElementsAre("gpu:1->gpu:0")) << "with s2: " << with_s2;
  }
}

// A ladder of switches, each pair joined by a fast narrow link and a slow wide one, gives a switch
// a path per rung that no other beats on both latency and bandwidth (1,500 rungs took 15 s to
// build, a review): a node keeps at most 32, and the route is still no slower than the all-narrow
// or the all-wide path.
TEST(ClusterRoutes, ALadderOfParallelLinksBuildsAndRoutesWell) {
  constexpr int kRungs = 2000;
  std::vector<std::string> switches;
  std::vector<Link> links;
  double narrow_latency = 0, narrow_bandwidth = 1e300, wide_latency = 0;
  for (int i = 0; i < kRungs; ++i) switches.push_back(std::string("s").append(std::to_string(i)));
  links.push_back(link("gpu:0", switches.front(), 1e12, 0, "in"));
  links.push_back(link(switches.back(), "gpu:1", 1e12, 0, "out"));
  for (int i = 0; i + 1 < kRungs; ++i) {
    const double bandwidth = 1e11 * (1 - 0.5 * i / kRungs);
    links.push_back(link(switches[i], switches[i + 1], bandwidth, 0, std::string("n").append(std::to_string(i))));
    links.push_back(link(switches[i], switches[i + 1], 1e12, 1e-6, std::string("w").append(std::to_string(i))));
    narrow_bandwidth = std::min(narrow_bandwidth, bandwidth), wide_latency += 1e-6;
  }
  const Cluster c = Cluster::build("ladder", {gpu("gpu:0"), gpu("gpu:1")}, switches, links);
  const double mib = 1024.0 * 1024.0, route_s = c.transfer_time_s(0, 1, mib);
  EXPECT_LE(route_s, narrow_latency + mib / narrow_bandwidth);
  EXPECT_LE(route_s, wide_latency + mib / 1e12);
  EXPECT_EQ(c.route(0, 1).size(), static_cast<std::size_t>(kRungs + 1));
}

TEST(ClusterRoutes, ParallelLinksGetDistinctChannelNames) {
  const Cluster c = Cluster::build("par", {gpu("gpu:0"), gpu("gpu:1")}, {},
                                   {link("gpu:0", "gpu:1", 20 * kGB, 0, "nvlink-a"),
                                    link("gpu:0", "gpu:1", 20 * kGB, 0, "nvlink-b")});
  EXPECT_EQ(c.channel_name(0), "gpu:0->gpu:1 [nvlink-a]");
  EXPECT_EQ(c.channel_name(3), "gpu:1->gpu:0 [nvlink-b]");
  EXPECT_THAT(c.route(0, 1), ElementsAre(0u));
}

TEST(ClusterRoutes, UnnamedLinksAreNamedAfterTheirEnds) {
  const Cluster c = two_gpus_behind_a_switch();
  EXPECT_EQ(c.link(2).name, "pcie0<->gpu:0");
}

TEST(ClusterLookups, DevicesByNameAndKind) {
  const Cluster c = two_gpus_behind_a_switch();
  EXPECT_EQ(c.name(), "two-gpus");
  EXPECT_EQ(c.num_devices(), 3u);
  EXPECT_EQ(c.find_device("gpu:1"), DeviceId{2});
  EXPECT_EQ(c.find_device("gpu:7"), std::nullopt);
  EXPECT_EQ(c.find_device("pcie0"), std::nullopt);  // a switch is not a device
  EXPECT_THAT(c.device_ids(DeviceKind::gpu), ElementsAre(1u, 2u));
  EXPECT_THAT(c.device_ids(DeviceKind::cpu), ElementsAre(0u));
  EXPECT_THAT(c.switches(), ElementsAre("root", "pcie0"));
  EXPECT_EQ(device_kind_name(DeviceKind::gpu), "gpu");
  EXPECT_EQ(parse_device_kind("cpu"), DeviceKind::cpu);
  EXPECT_THAT(error_of([] { parse_device_kind("tpu"); }), HasSubstr("'tpu'"));
}

TEST(ClusterLookups, UnknownDeviceNameListsTheDevices) {
  const Cluster c = two_gpus_behind_a_switch();
  EXPECT_THAT(error_of([&] { c.device_id("gpu:7"); }),
              AllOf(HasSubstr("'gpu:7'"), HasSubstr("two-gpus"), HasSubstr("cpu:0, gpu:0, gpu:1")));
}

TEST(ClusterLookups, ADeviceNameWithACommaIsRefused) {
  // --on takes comma-separated names: such a device could not be named (a QA pass).
  EXPECT_THAT(error_of([] { Cluster::build("c", {cpu("cpu:0"), gpu("gpu,0")}, {}, {link("cpu:0", "gpu,0", 10 * kGB, 0)}); }),
              AllOf(HasSubstr("'gpu,0'"), HasSubstr("may not contain ','")));
}

// Names go into tables and one-line messages: a newline in a device's name split simulate's table
// (a QA pass).
TEST(ClusterLookups, NamesWithControlCharactersAreRefused) {
  EXPECT_THAT(error_of([] { Cluster::build("c", {cpu("cpu:0"), gpu("gpu\n1")}, {}, {link("cpu:0", "gpu\n1", 10 * kGB, 0)}); }),
              HasSubstr("device #1's name has a control character"));
  EXPECT_THAT(error_of([] { Cluster::build("c\t", {cpu("cpu:0"), gpu("gpu:0")}, {}, {link("cpu:0", "gpu:0", 10 * kGB, 0)}); }),
              HasSubstr("the cluster's name has a control character"));
  EXPECT_THAT(error_of([] { Cluster::build("c", {cpu("cpu:0"), gpu("gpu:0")}, {"sw\x1b"}, {link("cpu:0", "gpu:0", 10 * kGB, 0)}); }),
              HasSubstr("switch #0's name has a control character"));
  Link named = link("cpu:0", "gpu:0", 10 * kGB, 0);
  named.name = "pcie\n0";
  EXPECT_THAT(error_of([&] { Cluster::build("c", {cpu("cpu:0"), gpu("gpu:0")}, {}, {named}); }),
              HasSubstr("link #0's name has a control character"));
}

// ---- Presets ------------------------------------------------------------------------------------

TEST(ClusterPresets, NamesAreTheDocumentedOnes) {
  EXPECT_THAT(cluster_preset_names(),
              ElementsAre("k80x2", "k80x4", "k80x8", "p100x4", "p100x8", "dgx-h100", "h100-box"));
}

TEST(ClusterPresets, EveryPresetBuildsWithItsDevicesAndAllRoutes) {
  struct Expected {
    const char* name;
    int cpus, gpus;
  };
  for (const Expected& e : {Expected{"k80x2", 1, 2}, Expected{"k80x4", 1, 4}, Expected{"k80x8", 1, 8},
                            Expected{"p100x4", 1, 4}, Expected{"p100x8", 2, 8}, Expected{"dgx-h100", 2, 8},
                            Expected{"h100-box", 1, 1}}) {
    SCOPED_TRACE(e.name);
    const Cluster c = cluster_preset(e.name);
    EXPECT_EQ(c.name(), e.name);
    ASSERT_EQ(c.num_devices(), static_cast<std::size_t>(e.cpus + e.gpus));
    for (int i = 0; i < e.cpus; ++i) {
      const Device& d = c.device(static_cast<DeviceId>(i));
      EXPECT_EQ(d.name, "cpu:" + std::to_string(i));
      EXPECT_EQ(d.kind, DeviceKind::cpu);
    }
    for (int i = 0; i < e.gpus; ++i) {
      const Device& d = c.device(static_cast<DeviceId>(e.cpus + i));
      EXPECT_EQ(d.name, "gpu:" + std::to_string(i));
      EXPECT_EQ(d.kind, DeviceKind::gpu);
      EXPECT_GT(d.peak_flops, c.device(0).peak_flops);
    }
    for (DeviceId a = 0; a < c.num_devices(); ++a)
      for (DeviceId b = 0; b < c.num_devices(); ++b) {
        EXPECT_EQ(c.route(a, b).empty(), a == b) << c.device(a).name << " -> " << c.device(b).name;
        if (a == b) continue;
        EXPECT_GT(c.transfer_time_s(a, b, 1e6), 0.0);
        EXPECT_TRUE(std::isfinite(c.route_bandwidth(a, b)));
        EXPECT_EQ(c.channel_source(c.route(a, b).front()), c.device(a).name);
        EXPECT_EQ(c.channel_target(c.route(a, b).back()), c.device(b).name);
      }
  }
}

TEST(ClusterPresets, K80PairsShareABoardSwitchAndOtherBoardsGoThroughTheHost) {
  const Cluster c = cluster_preset("k80x4");
  const DeviceId g0 = c.device_id("gpu:0"), g1 = c.device_id("gpu:1"), g2 = c.device_id("gpu:2");
  EXPECT_EQ(c.route_description(g0, g1), "gpu:0 -> pcie0 -> gpu:1");
  EXPECT_EQ(c.route_description(g0, g2), "gpu:0 -> pcie0 -> root0 -> pcie1 -> gpu:2");
  EXPECT_EQ(c.route_description(c.device_id("cpu:0"), g2), "cpu:0 -> root0 -> pcie1 -> gpu:2");
  EXPECT_DOUBLE_EQ(c.route_bandwidth(g0, g2), 12 * kGB);
  EXPECT_DOUBLE_EQ(c.device(g0).peak_flops, 4.37e12);
  EXPECT_EQ(c.device(g0).memory_bytes, 12ull << 30);
}

TEST(ClusterPresets, P100NvlinkNeighboursTalkDirectlyOthersOverPcie) {
  const Cluster c = cluster_preset("p100x8");
  EXPECT_EQ(c.route_description(c.device_id("gpu:0"), c.device_id("gpu:3")), "gpu:0 -> gpu:3");
  EXPECT_EQ(c.route_description(c.device_id("gpu:1"), c.device_id("gpu:5")), "gpu:1 -> gpu:5");
  EXPECT_EQ(c.route_description(c.device_id("gpu:0"), c.device_id("gpu:5")),
            "gpu:0 -> pcie0 -> root0 -> root1 -> pcie2 -> gpu:5");
  EXPECT_DOUBLE_EQ(c.route_bandwidth(c.device_id("gpu:0"), c.device_id("gpu:4")), 20 * kGB);
}

TEST(ClusterPresets, DgxH100GpusTalkThroughTheNvswitch) {
  const Cluster c = cluster_preset("dgx-h100");
  const DeviceId g0 = c.device_id("gpu:0"), g7 = c.device_id("gpu:7");
  EXPECT_EQ(c.route_description(g0, c.device_id("gpu:1")), "gpu:0 -> nvswitch -> gpu:1");
  EXPECT_DOUBLE_EQ(c.route_bandwidth(g0, g7), 450 * kGB);
  EXPECT_EQ(c.route_description(c.device_id("cpu:1"), g0), "cpu:1 -> root1 -> root0 -> pcie0 -> gpu:0");
}

TEST(ClusterPresets, H100BoxUsesPageableCopyRates) {
  const Cluster c = cluster_preset("h100-box");
  const DeviceId host = c.device_id("cpu:0"), dev = c.device_id("gpu:0");
  // Measured on an H100 machine (docs/data/h100-2026-11-23): pageable copies, 5.5 us for a small one
  // (11 us until a review found the recorded measurement, local-cluster.json, half that).
  EXPECT_DOUBLE_EQ(c.transfer_time_s(host, dev, 11e9), 5.5 * kUs + 1.0);
  EXPECT_DOUBLE_EQ(c.transfer_time_s(dev, host, 12.5e9), 5.5 * kUs + 1.0);
  const Cluster measured = resolve_cluster(std::string(PLACER_EXAMPLES) + "/../docs/data/h100-2026-11-23/local-cluster.json");
  EXPECT_NEAR(c.route_latency_s(host, dev),
              measured.route_latency_s(measured.device_id("cpu:0"), measured.device_id("gpu:0")), 0.05 * kUs);
  EXPECT_DOUBLE_EQ(c.device(dev).peak_flops, 51.6e12);
  EXPECT_DOUBLE_EQ(c.device(host).peak_flops, 1.06e12);
  // A gradient is an autograd node running several kernels: its fitted overhead is larger (about
  // 5x on the GPU, where launches dominate; 1.8x on the CPU).
  EXPECT_GT(c.device(dev).backward_overhead_s(), 4 * c.device(dev).op_overhead_s);
  EXPECT_GT(c.device(host).backward_overhead_s(), 1.5 * c.device(host).op_overhead_s);
  EXPECT_GT(c.device(dev).backward_efficiency[static_cast<std::size_t>(OpClass::conv)].compute, 1.0);
  // Fitted efficiencies: cuDNN's TF32 convolutions beat the fp32 matrix-product peak.
  EXPECT_GT(c.device(dev).efficiency[static_cast<std::size_t>(OpClass::conv)].compute, 1.0);
  EXPECT_EQ(c.device(dev).efficiency[static_cast<std::size_t>(OpClass::elementwise)].compute, 0.0) << "not fitted: the default";
}

// The fitted constants of h100-box (and of dgx-h100's GPUs) are `placer fit`'s output kept in the
// repository, rounded to 3 decimals (efficiencies) and 0.1 us (overheads): refit one, update both.
TEST(ClusterPresets, H100BoxCarriesTheFitInTheRepository) {
  const Cluster fitted = resolve_cluster(std::string(PLACER_EXAMPLES) + "/../docs/data/h100-2026-11-23/fitted-cluster.json");
  for (const char* preset : {"h100-box", "dgx-h100"})
    for (const char* name : {"cpu:0", "gpu:0"}) {
      const Cluster c = cluster_preset(preset);
      const Device& d = c.device(c.device_id(name));
      const Device& f = fitted.device(fitted.device_id(name));
      SCOPED_TRACE(std::string(preset) + " " + name);
      if (d.kind == DeviceKind::cpu && std::string(preset) == "dgx-h100") continue;  // another CPU
      EXPECT_NEAR(d.op_overhead_s, f.op_overhead_s, 0.05e-6);
      EXPECT_NEAR(d.backward_overhead_s(), f.backward_overhead_s(), 0.05e-6);
      for (std::size_t k = 0; k < kNumOpClasses; ++k) {
        SCOPED_TRACE(k);
        EXPECT_NEAR(d.efficiency[k].compute, f.efficiency[k].compute, 0.0005);
        EXPECT_NEAR(d.efficiency[k].memory, f.efficiency[k].memory, 0.0005);
        EXPECT_NEAR(d.backward_efficiency[k].compute, f.backward_efficiency[k].compute, 0.0005);
        EXPECT_NEAR(d.backward_efficiency[k].memory, f.backward_efficiency[k].memory, 0.0005);
      }
    }
}

TEST(ClusterJson, DeviceEfficienciesRoundTripAndAreChecked) {
  const Cluster original = cluster_preset("h100-box");
  const nlohmann::json j = cluster_to_json(original);
  EXPECT_TRUE(j["devices"][1]["efficiency"].contains("conv"));
  EXPECT_FALSE(j["devices"][1]["efficiency"]["elementwise"].contains("compute"));
  const Cluster back = parse_cluster_json(j, "h100-box.json");
  EXPECT_EQ(back.device(1).efficiency, original.device(1).efficiency);
  EXPECT_EQ(back.device(1).backward_efficiency, original.device(1).backward_efficiency);
  EXPECT_EQ(back.device(1).backward_op_overhead_s, original.device(1).backward_op_overhead_s);
  EXPECT_EQ(back.devices()[0], original.devices()[0]);
  // Without the gradient fields a device prices gradients as forward ops.
  nlohmann::json plain = j;
  plain["devices"][1].erase("backward_efficiency");
  plain["devices"][1].erase("backward_op_overhead_s");
  const Device d = parse_cluster_json(plain, "plain.json").device(1);
  EXPECT_EQ(d.backward_overhead_s(), d.op_overhead_s);
  EXPECT_EQ(d.backward_efficiency[static_cast<std::size_t>(OpClass::conv)].compute, 0.0);
  nlohmann::json negative = j;
  negative["devices"][1]["backward_op_overhead_s"] = -1e-6;
  EXPECT_THAT(error_of([&] { parse_cluster_json(negative, "x.json"); }), HasSubstr("backward_op_overhead_s"));
  nlohmann::json bad_class = j;
  bad_class["devices"][1]["backward_efficiency"] = {{"convolution", {{"compute", 1.0}}}};
  EXPECT_THAT(error_of([&] { parse_cluster_json(bad_class, "x.json"); }), AllOf(HasSubstr("backward_efficiency"), HasSubstr("convolution")));
  auto with = [&](nlohmann::json eff) {
    nlohmann::json bad = j;
    bad["devices"][1]["efficiency"] = std::move(eff);
    return bad;
  };
  EXPECT_THAT(error_of([&] { parse_cluster_json(with({{"convolution", {{"compute", 1.0}}}}), "x.json"); }),
              HasSubstr("convolution"));
  // The classes the message offers are the ones that take an efficiency: not alias (a QA pass).
  const std::string unknown = error_of([&] { parse_cluster_json(with({{"foo", {{"compute", 1.0}}}}), "x.json"); });
  EXPECT_THAT(unknown, AllOf(HasSubstr("unknown op class 'foo'"), HasSubstr("elementwise"), HasSubstr("optimizer"),
                             Not(HasSubstr("alias"))));
  EXPECT_THAT(error_of([&] { parse_cluster_json(with({{"conv", {{"compute", -1.0}}}}), "x.json"); }),
              AllOf(HasSubstr("conv"), HasSubstr("positive")));
  EXPECT_THAT(error_of([&] { parse_cluster_json(with({{"conv", {{"speed", 1.0}}}}), "x.json"); }), HasSubstr("speed"));
  EXPECT_THAT(error_of([&] { parse_cluster_json(with({{"conv", 2.0}}), "x.json"); }), HasSubstr("efficiency.conv"));
  // An empty entry said nothing and was accepted, where an op type's was refused (a review).
  EXPECT_THAT(error_of([&] { parse_cluster_json(with({{"conv", nlohmann::json::object()}}), "x.json"); }),
              HasSubstr("efficiency.conv needs 'compute' or 'memory'"));
  // Aliases cost nothing: an efficiency for them was accepted and ignored (found by a review).
  EXPECT_THAT(error_of([&] { parse_cluster_json(with({{"alias", {{"compute", 1.0}}}}), "x.json"); }),
              HasSubstr("class 'alias' takes no efficiency"));
}

TEST(ClusterJson, ABandwidthBySizeRoundTripsAndIsChecked) {
  Cluster original = cluster_preset("h100-box");
  nlohmann::json j = cluster_to_json(original);
  EXPECT_FALSE(j["devices"][0].contains("bandwidth_by_size")) << "presets have none";
  j["devices"][0]["bandwidth_by_size"] = nlohmann::json::array({{{"bytes", 1 << 20}, {"bandwidth", 4e11}}, {{"bytes", 1 << 24}, {"bandwidth", 2e11}}});
  const Cluster with = parse_cluster_json(j, "x.json");
  ASSERT_EQ(with.device(0).bandwidth_by_size.size(), 2u);
  EXPECT_EQ(with.device(0).bandwidth_by_size[1].bytes, 1u << 24);
  EXPECT_EQ(with.device(0).bandwidth_by_size[1].bytes_per_s, 2e11);
  EXPECT_EQ(parse_cluster_json(cluster_to_json(with), "y.json").device(0), with.device(0));
  EXPECT_DOUBLE_EQ(with.device(0).bandwidth_for(1 << 22), 3e11);
  EXPECT_DOUBLE_EQ(with.device(0).bandwidth_for(1e12), with.device(0).memory_bandwidth_bytes_per_s);
  auto error_with = [&](nlohmann::json curve) {
    nlohmann::json bad = j;
    bad["devices"][0]["bandwidth_by_size"] = std::move(curve);
    return error_of([&] { parse_cluster_json(bad, "x.json"); });
  };
  EXPECT_THAT(error_with({{{"bytes", 1 << 24}, {"bandwidth", 2e11}}, {{"bytes", 1 << 20}, {"bandwidth", 4e11}}}),
              AllOf(HasSubstr("bandwidth_by_size[1]"), HasSubstr("ascend")));
  EXPECT_THAT(error_with({{{"bytes", 0}, {"bandwidth", 2e11}}}), AllOf(HasSubstr("bandwidth_by_size[0]"), HasSubstr("bytes")));
  EXPECT_THAT(error_with({{{"bytes", 1024}, {"bandwidth", -1.0}}}), AllOf(HasSubstr("bandwidth_by_size[0]"), HasSubstr("positive")));
  EXPECT_THAT(error_with({{{"bytes", 1024}, {"speed", 1.0}}}), HasSubstr("speed"));
  EXPECT_THAT(error_with(3.0), HasSubstr("must be an array"));
}

TEST(ClusterJson, AProductCurveRoundTripsAndIsChecked) {
  nlohmann::json j = cluster_to_json(cluster_preset("h100-box"));
  EXPECT_FALSE(j["devices"][0].contains("product_efficiency_by_size")) << "presets have none";
  j["devices"][0]["product_efficiency_by_size"] = nlohmann::json::array({{{"min_dim", 16}, {"compute", 0.2}}, {{"min_dim", 256}, {"compute", 0.6}}});
  const Cluster with = parse_cluster_json(j, "x.json");
  const Device& d = with.device(0);
  ASSERT_EQ(d.product_efficiency_by_size.size(), 2u);
  EXPECT_EQ(d.product_efficiency_by_size[1], (Device::SizePoint{.size = 256, .compute = 0.6}));
  EXPECT_EQ(parse_cluster_json(cluster_to_json(with), "y.json").device(0), d);
  EXPECT_DOUBLE_EQ(d.product_efficiency_for(8), 0.2) << "below the first point: its efficiency";
  EXPECT_DOUBLE_EQ(d.product_efficiency_for(64), 0.4) << "halfway in log(min_dim)";
  EXPECT_DOUBLE_EQ(d.product_efficiency_for(256), 0.6);
  EXPECT_DOUBLE_EQ(d.product_efficiency_for(4096), 0.6) << "past the last point: its efficiency";
  Device one = d;
  one.product_efficiency_by_size = {{64, 0.5}};
  EXPECT_DOUBLE_EQ(one.product_efficiency_for(8), 0.5);
  EXPECT_DOUBLE_EQ(one.product_efficiency_for(4096), 0.5) << "one point: its efficiency everywhere";
  one.product_efficiency_by_size.clear();
  EXPECT_EQ(one.product_efficiency_for(64), 0.0) << "none: the class's applies";
  auto error_with = [&](nlohmann::json curve) {
    nlohmann::json bad = j;
    bad["devices"][0]["product_efficiency_by_size"] = std::move(curve);
    return error_of([&] { parse_cluster_json(bad, "x.json"); });
  };
  EXPECT_THAT(error_with({{{"min_dim", 256}, {"compute", 0.6}}, {{"min_dim", 16}, {"compute", 0.2}}}),
              AllOf(HasSubstr("product_efficiency_by_size[1]"), HasSubstr("ascend")));
  EXPECT_THAT(error_with({{{"min_dim", 0}, {"compute", 0.2}}}), AllOf(HasSubstr("product_efficiency_by_size[0]"), HasSubstr("min_dim")));
  EXPECT_THAT(error_with({{{"min_dim", 16}, {"compute", 0.0}}}), AllOf(HasSubstr("product_efficiency_by_size[0]"), HasSubstr("positive")));
  EXPECT_THAT(error_with({{{"min_dim", 16}, {"rate", 1.0}}}), HasSubstr("rate"));
  EXPECT_THAT(error_with({{{"min_dim", 16.5}, {"compute", 0.2}}}), HasSubstr("min_dim"));
  EXPECT_THAT(error_with(3.0), HasSubstr("must be an array"));
  // Convolutions by their kernel area: the same form, keyed by kernel_area.
  nlohmann::json k = j;
  k["devices"][0]["conv_efficiency_by_kernel"] = nlohmann::json::array({{{"kernel_area", 1}, {"compute", 0.6}}, {{"kernel_area", 9}, {"compute", 0.9}}});
  const Cluster conv = parse_cluster_json(k, "k.json");
  ASSERT_EQ(conv.device(0).conv_efficiency_by_kernel.size(), 2u);
  EXPECT_EQ(parse_cluster_json(cluster_to_json(conv), "k2.json").device(0), conv.device(0));
  EXPECT_NEAR(conv.device(0).conv_efficiency_for(3), 0.75, 1e-12) << "halfway in log(area)";
  EXPECT_DOUBLE_EQ(conv.device(0).conv_efficiency_for(49), 0.9);
  k["devices"][0]["conv_efficiency_by_kernel"] = nlohmann::json::array({{{"kernel_area", 9}, {"compute", 0.9}}, {{"kernel_area", 1}, {"compute", 0.6}}});
  EXPECT_THAT(error_of([&] { parse_cluster_json(k, "k.json"); }), AllOf(HasSubstr("conv_efficiency_by_kernel[1]"), HasSubstr("kernel_area must ascend")));
  k["devices"][0]["conv_efficiency_by_kernel"] = nlohmann::json::array({{{"min_dim", 1}, {"compute", 0.6}}});
  EXPECT_THAT(error_of([&] { parse_cluster_json(k, "k.json"); }), HasSubstr("min_dim"));
}

TEST(ClusterJson, EfficienciesByOpTypeRoundTripAndAreChecked) {
  nlohmann::json j = cluster_to_json(cluster_preset("h100-box"));
  EXPECT_FALSE(j["devices"][0].contains("efficiency_by_type")) << "presets have none";
  j["devices"][0]["efficiency_by_type"] = {{"MaxPool", {{"compute", 0.002}}}, {"MaxPoolGrad", {{"compute", 0.01}, {"memory", 0.3}}}};
  const Cluster with = parse_cluster_json(j, "x.json");
  const auto& types = with.device(0).efficiency_by_type;
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(types.at("MaxPool"), (Device::Efficiency{.compute = 0.002, .memory = 0}));
  EXPECT_EQ(types.at("MaxPoolGrad"), (Device::Efficiency{.compute = 0.01, .memory = 0.3}));
  EXPECT_EQ(parse_cluster_json(cluster_to_json(with), "y.json").device(0), with.device(0));
  auto error_with = [&](nlohmann::json types) {
    nlohmann::json bad = j;
    bad["devices"][0]["efficiency_by_type"] = std::move(types);
    return error_of([&] { parse_cluster_json(bad, "x.json"); });
  };
  EXPECT_THAT(error_with({{"MaxPool", {{"compute", -1.0}}}}), AllOf(HasSubstr("efficiency_by_type.MaxPool"), HasSubstr("positive")));
  EXPECT_THAT(error_with({{"MaxPool", {{"compute", 0.0}}}}), HasSubstr("positive"));
  EXPECT_THAT(error_with({{"MaxPool", nlohmann::json::object()}}), HasSubstr("needs 'compute' or 'memory'"));
  EXPECT_THAT(error_with({{"MaxPool", {{"speed", 1.0}}}}), HasSubstr("speed"));
  EXPECT_THAT(error_with({{"", {{"compute", 0.1}}}}), HasSubstr("empty op type"));
  EXPECT_THAT(error_with(3.0), HasSubstr("keyed by op type"));
  // Built in code, the same checks hold.
  std::vector<Device> devices(with.devices().begin(), with.devices().end());
  devices[0].efficiency_by_type["Relu"] = {.compute = 0, .memory = 0};
  EXPECT_THAT(error_of([&] { Cluster::build("t", devices, {}, {}); }), HasSubstr("efficiency_by_type.Relu"));
}

TEST(ClusterPresets, UnknownPresetListsThePresets) {
  EXPECT_THAT(error_of([] { cluster_preset("k80x3"); }),
              AllOf(HasSubstr("'k80x3'"), HasSubstr("k80x2"), HasSubstr("dgx-h100"), HasSubstr("h100-box")));
}

TEST(ClusterPresets, ResolveTakesAPresetOrAFile) {
  EXPECT_EQ(resolve_cluster("p100x4").name(), "p100x4");
  const std::string path =
      write_temp_file("resolve_cluster.json", cluster_to_json(cluster_preset("k80x2")).dump(2));
  EXPECT_EQ(resolve_cluster(path).name(), "k80x2");
  EXPECT_THAT(error_of([] { resolve_cluster("no-such-cluster"); }),
              AllOf(HasSubstr("'no-such-cluster'"), HasSubstr("k80x4")));
}

// ---- JSON ---------------------------------------------------------------------------------------

void expect_same_cluster(const Cluster& a, const Cluster& b) {
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.num_devices(), b.num_devices());
  for (DeviceId d = 0; d < a.num_devices(); ++d) EXPECT_EQ(a.device(d), b.device(d));
  EXPECT_THAT(b.switches(), ::testing::ElementsAreArray(a.switches()));
  ASSERT_EQ(a.num_links(), b.num_links());
  for (std::size_t l = 0; l < a.num_links(); ++l) EXPECT_EQ(a.link(l), b.link(l));
  for (DeviceId x = 0; x < a.num_devices(); ++x)
    for (DeviceId y = 0; y < a.num_devices(); ++y) {
      EXPECT_THAT(b.route(x, y), ::testing::ElementsAreArray(a.route(x, y)));
      EXPECT_EQ(a.transfer_time_s(x, y, 3e7), b.transfer_time_s(x, y, 3e7));
    }
}

TEST(ClusterJson, EveryPresetRoundTrips) {
  for (const std::string& name : cluster_preset_names()) {
    SCOPED_TRACE(name);
    const Cluster original = cluster_preset(name);
    expect_same_cluster(original, parse_cluster_json(cluster_to_json(original), name));
    const auto text = cluster_to_json(original).dump(2);
    expect_same_cluster(original, parse_cluster_json(nlohmann::json::parse(text), name));
  }
}

// `placer clusters --json` prints a list: given as a cluster file, the error says to take an entry
// ("must be a JSON object, got array": a review).
TEST(ClusterJson, AListOfClustersIsNamedAsSuch) {
  const nlohmann::json list = nlohmann::json::array({cluster_to_json(cluster_preset("k80x2")), cluster_to_json(cluster_preset("k80x4"))});
  EXPECT_THAT(error_of([&] { parse_cluster_json(list, "clusters.json"); }),
              HasSubstr("clusters.json is a list (2 entries), not one cluster: a cluster file is one object, such as one entry of "
                        "`placer clusters --json`"));
}

TEST(ClusterJson, AsymmetricLinkRoundTripsAsTwoBandwidths) {
  const Cluster original = cluster_preset("h100-box");
  const nlohmann::json j = cluster_to_json(original);
  EXPECT_EQ(j["links"][0]["bandwidth_ab"], 11e9);
  EXPECT_EQ(j["links"][0]["bandwidth_ba"], 12.5e9);
  EXPECT_FALSE(j["links"][0].contains("bandwidth"));
  expect_same_cluster(original, parse_cluster_json(j, "h100-box.json"));
  // A link's name is optional, but not empty (an empty one was accepted: a review).
  nlohmann::json unnamed = j;
  unnamed["links"][0]["name"] = "";
  EXPECT_THAT(error_of([&] { parse_cluster_json(unnamed, "x.json"); }), HasSubstr("field 'name' is empty"));
}

// The example of docs/clusters.md.
constexpr const char* kDocExample = R"json({
  "format": "placer-cluster",
  "version": 1,
  "name": "one-k80-board",
  "devices": [
    {"name": "cpu:0", "kind": "cpu", "model": "Intel Xeon E5-2699 v3", "peak_flops": 1.3248e12,
     "memory_bandwidth": 6.83e10, "memory_bytes": 274877906944, "op_overhead_s": 8e-6},
    {"name": "gpu:0", "kind": "gpu", "model": "NVIDIA Tesla K80 (one GK210 of two)", "peak_flops": 4.37e12,
     "memory_bandwidth": 2.4e11, "memory_bytes": 12884901888, "op_overhead_s": 1.5e-5, "streams": 1},
    {"name": "gpu:1", "kind": "gpu", "model": "NVIDIA Tesla K80 (one GK210 of two)", "peak_flops": 4.37e12,
     "memory_bandwidth": 2.4e11, "memory_bytes": 12884901888, "op_overhead_s": 1.5e-5}
  ],
  "switches": ["root0", "pcie0"],
  "links": [
    {"name": "host-memory", "a": "cpu:0", "b": "root0", "bandwidth": 6.83e10, "latency_s": 0},
    {"name": "uplink", "a": "root0", "b": "pcie0", "bandwidth_ab": 1.2e10, "bandwidth_ba": 1.3e10, "latency_s": 1e-5},
    {"a": "pcie0", "b": "gpu:0", "bandwidth": 1.2e10, "latency_s": 1e-5},
    {"a": "pcie0", "b": "gpu:1", "bandwidth": 1.2e10, "latency_s": 1e-5}
  ]
})json";

TEST(ClusterJson, ParsesTheDocumentedExample) {
  const Cluster c = parse_cluster_json(nlohmann::json::parse(kDocExample), "example.json");
  EXPECT_EQ(c.name(), "one-k80-board");
  EXPECT_EQ(c.num_devices(), 3u);
  EXPECT_EQ(c.device(1).streams, 1);
  EXPECT_EQ(c.device(2).memory_bytes, 12ull << 30);
  EXPECT_EQ(c.link(2).name, "pcie0<->gpu:0");
  EXPECT_EQ(c.route_description(1, 2), "gpu:0 -> pcie0 -> gpu:1");
  EXPECT_DOUBLE_EQ(c.route_bandwidth(0, 1), 1.2e10);
  EXPECT_DOUBLE_EQ(c.route_bandwidth(1, 0), 1.2e10);
  EXPECT_DOUBLE_EQ(c.route_latency_s(0, 1), 2e-5);
}

// The two-host example of docs/clusters.md.
constexpr const char* kTwoHostExample = R"json({
  "format": "placer-cluster", "version": 1, "name": "two-hosts",
  "devices": [
    {"name": "h0/cpu:0", "kind": "cpu", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 137438953472, "op_overhead_s": 8e-6},
    {"name": "h0/gpu:0", "kind": "gpu", "peak_flops": 5.1e13, "memory_bandwidth": 3.35e12, "memory_bytes": 85899345920, "op_overhead_s": 4e-5},
    {"name": "h1/cpu:0", "kind": "cpu", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 137438953472, "op_overhead_s": 8e-6},
    {"name": "h1/gpu:0", "kind": "gpu", "peak_flops": 5.1e13, "memory_bandwidth": 3.35e12, "memory_bytes": 85899345920, "op_overhead_s": 4e-5}
  ],
  "switches": ["h0/root", "h1/root", "ethernet"],
  "links": [
    {"a": "h0/cpu:0", "b": "h0/root", "bandwidth": 1e11, "latency_s": 0},
    {"a": "h0/root", "b": "h0/gpu:0", "bandwidth_ab": 1.6e10, "bandwidth_ba": 1.1e10, "latency_s": 2e-5},
    {"a": "h1/cpu:0", "b": "h1/root", "bandwidth": 1e11, "latency_s": 0},
    {"a": "h1/root", "b": "h1/gpu:0", "bandwidth_ab": 1.6e10, "bandwidth_ba": 1.1e10, "latency_s": 2e-5},
    {"name": "h0-nic", "a": "h0/root", "b": "ethernet", "bandwidth": 1.25e10, "latency_s": 5e-6},
    {"name": "h1-nic", "a": "h1/root", "b": "ethernet", "bandwidth": 1.25e10, "latency_s": 5e-6}
  ]
})json";

TEST(ClusterJson, ParsesTheTwoHostExample) {
  const Cluster c = parse_cluster_json(nlohmann::json::parse(kTwoHostExample), "two-hosts.json");
  const DeviceId g0 = c.device_id("h0/gpu:0"), g1 = c.device_id("h1/gpu:0");
  EXPECT_EQ(c.route_description(g0, g1), "h0/gpu:0 -> h0/root -> ethernet -> h1/root -> h1/gpu:0");
  EXPECT_DOUBLE_EQ(c.route_bandwidth(g0, g1), 1.1e10);  // leaving the GPU is the slowest hop
  EXPECT_DOUBLE_EQ(c.route_latency_s(g0, g1), 5e-5);
  EXPECT_DOUBLE_EQ(c.route_bandwidth(c.device_id("h0/cpu:0"), c.device_id("h1/cpu:0")), 1.25e10);
}

TEST(ClusterJson, LoadsAFile) {
  const std::string path = write_temp_file("cluster_example.json", kDocExample);
  EXPECT_EQ(load_cluster_file(path).num_devices(), 3u);
}

// ---- Bad input ----------------------------------------------------------------------------------

TEST(ClusterErrors, NoDevices) {
  EXPECT_THAT(error_of([] { Cluster::build("empty", {}, {"sw"}, {}); }),
              AllOf(HasSubstr("'empty'"), HasSubstr("no devices")));
}

TEST(ClusterErrors, LinkToAMissingDevice) {
  EXPECT_THAT(error_of([] {
                Cluster::build("c", {gpu("gpu:0"), gpu("gpu:1")}, {"sw"},
                               {link("gpu:0", "sw", kGB, 0), link("sw", "gpu:9", kGB, 0, "to-nine")});
              }),
              AllOf(HasSubstr("'to-nine'"), HasSubstr("'gpu:9'"), HasSubstr("gpu:0, gpu:1")));
}

TEST(ClusterErrors, NegativeBandwidth) {
  EXPECT_THAT(error_of([] {
                Cluster::build("c", {gpu("gpu:0"), gpu("gpu:1")}, {},
                               {Link{"nv", "gpu:0", "gpu:1", 20 * kGB, -1, 0}});
              }),
              AllOf(HasSubstr("link 'nv'"), HasSubstr("gpu:1->gpu:0"), HasSubstr("-1")));
}

TEST(ClusterErrors, NegativeLatencyAndBadDeviceNumbers) {
  EXPECT_THAT(error_of([] {
                Cluster::build("c", {gpu("gpu:0"), gpu("gpu:1")}, {}, {link("gpu:0", "gpu:1", kGB, -1e-6, "slow")});
              }),
              AllOf(HasSubstr("'slow'"), HasSubstr("latency_s")));
  EXPECT_THAT(error_of([] { Cluster::build("c", {gpu("gpu:0", 0.0)}, {}, {}); }),
              AllOf(HasSubstr("'gpu:0'"), HasSubstr("peak_flops")));
  Device no_memory = gpu("gpu:0");
  no_memory.memory_bytes = 0;
  EXPECT_THAT(error_of([&] { Cluster::build("c", {no_memory}, {}, {}); }),
              AllOf(HasSubstr("'gpu:0'"), HasSubstr("memory_bytes")));
  Device no_streams = gpu("gpu:0");
  no_streams.streams = 0;
  EXPECT_THAT(error_of([&] { Cluster::build("c", {no_streams}, {}, {}); }),
              AllOf(HasSubstr("'gpu:0'"), HasSubstr("streams")));
}

TEST(ClusterErrors, DuplicateNames) {
  EXPECT_THAT(error_of([] { Cluster::build("c", {gpu("gpu:0"), gpu("gpu:0")}, {}, {}); }),
              AllOf(HasSubstr("'gpu:0'"), HasSubstr("twice")));
  EXPECT_THAT(error_of([] { Cluster::build("c", {gpu("gpu:0")}, {"gpu:0"}, {}); }),
              AllOf(HasSubstr("switch 'gpu:0'"), HasSubstr("twice")));
  EXPECT_THAT(error_of([] {
                Cluster::build("c", {gpu("gpu:0"), gpu("gpu:1")}, {},
                               {link("gpu:0", "gpu:1", kGB, 0), link("gpu:0", "gpu:1", kGB, 0)});
              }),
              AllOf(HasSubstr("link 'gpu:0<->gpu:1'"), HasSubstr("twice")));
}

TEST(ClusterErrors, LinkToItself) {
  EXPECT_THAT(error_of([] { Cluster::build("c", {gpu("gpu:0")}, {}, {link("gpu:0", "gpu:0", kGB, 0, "loop")}); }),
              AllOf(HasSubstr("'loop'"), HasSubstr("itself")));
}

TEST(ClusterErrors, UnreachableDevice) {
  EXPECT_THAT(error_of([] {
                Cluster::build("c", {gpu("gpu:0"), gpu("gpu:1"), gpu("gpu:2")}, {"sw"},
                               {link("gpu:0", "sw", kGB, 0), link("sw", "gpu:1", kGB, 0)});
              }),
              AllOf(HasSubstr("no route"), HasSubstr("'gpu:2'")));
}

TEST(ClusterErrors, DevicesDoNotRelayTraffic) {
  // gpu:0 - gpu:1 - gpu:2 in a chain: gpu:0 cannot reach gpu:2 through gpu:1.
  EXPECT_THAT(error_of([] {
                Cluster::build("chain", {gpu("gpu:0"), gpu("gpu:1"), gpu("gpu:2")}, {},
                               {link("gpu:0", "gpu:1", kGB, 0), link("gpu:1", "gpu:2", kGB, 0)});
              }),
              AllOf(HasSubstr("no route from device 'gpu:0' to device 'gpu:2'"), HasSubstr("'chain'")));
}

TEST(ClusterErrors, MalformedJsonFileNamesThePath) {
  const std::string path = write_temp_file("broken_cluster.json", R"({"format": "placer-cluster", "version": )");
  EXPECT_THAT(error_of([&] { load_cluster_file(path); }), AllOf(HasSubstr(path), HasSubstr("not valid JSON")));
}

TEST(ClusterErrors, MissingFileNamesThePath) {
  EXPECT_THAT(error_of([] { load_cluster_file("/nonexistent/dir/cluster.json"); }),
              HasSubstr("'/nonexistent/dir/cluster.json'"));
}

TEST(ClusterErrors, BuildErrorsInAFileNameTheFile) {
  nlohmann::json j = nlohmann::json::parse(kDocExample);
  j["links"][2]["b"] = "gpu:7";
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "mine.json"); }),
              AllOf(HasSubstr("mine.json"), HasSubstr("'gpu:7'"), HasSubstr("'pcie0<->gpu:7'")));
  j = nlohmann::json::parse(kDocExample);
  j["links"][1]["bandwidth_ba"] = -5;
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "mine.json"); }),
              AllOf(HasSubstr("mine.json"), HasSubstr("'uplink'"), HasSubstr("-5")));
}

TEST(ClusterErrors, WrongFormatOrTooNewVersion) {
  nlohmann::json j = nlohmann::json::parse(kDocExample);
  j["format"] = "placer-graph";
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "g.json"); }),
              AllOf(HasSubstr("g.json"), HasSubstr("placer-graph"), HasSubstr("placer-cluster")));
  j = nlohmann::json::parse(kDocExample);
  j.erase("format");
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "g.json"); }), HasSubstr("'format' is missing"));
  j = nlohmann::json::parse(kDocExample);
  j["version"] = 2;
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "new.json"); }),
              AllOf(HasSubstr("new.json"), HasSubstr("version 2"), HasSubstr("newer")));
  // Past int64 it read as -1 ("must be at least 1, got -1": a fuzzing review).
  j = [&] {
    nlohmann::json doc = nlohmann::json::parse(kDocExample);
    doc["version"] = nlohmann::json::parse("18446744073709551615");
    return doc;
  }();
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "new.json"); }), AllOf(HasSubstr("version 18446744073709551615"), HasSubstr("newer")));
  j["version"] = 0;
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "old.json"); }), HasSubstr("at least 1, got 0"));
}

TEST(ClusterErrors, BadFieldsNameTheirPlace) {
  nlohmann::json j = nlohmann::json::parse(kDocExample);
  j["links"][3]["lateny_s"] = 1e-5;
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "t.json"); }),
              AllOf(HasSubstr("t.json: links[3]"), HasSubstr("'lateny_s'")));
  j = nlohmann::json::parse(kDocExample);
  j["devices"][1].erase("peak_flops");
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "t.json"); }),
              AllOf(HasSubstr("devices[1]"), HasSubstr("'gpu:0'"), HasSubstr("'peak_flops'")));
  j = nlohmann::json::parse(kDocExample);
  j["devices"][1].erase("kind");  // where it is, once (the prefix came twice)
  EXPECT_EQ(error_of([&] { parse_cluster_json(j, "t.json"); }), "t.json: devices[1] ('gpu:0'): missing field 'kind'");
  j = nlohmann::json::parse(kDocExample);
  j["devices"][2]["kind"] = "tpu";
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "t.json"); }),
              AllOf(HasSubstr("devices[2]"), HasSubstr("'tpu'")));
  j = nlohmann::json::parse(kDocExample);
  j["devices"][0]["memory_bytes"] = -1;
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "t.json"); }),
              AllOf(HasSubstr("'cpu:0'"), HasSubstr("memory_bytes")));
  // One rule, one wording: 0 bytes and half a byte were told different things.
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(16000000000.5), nlohmann::json(-1)}) {
    j["devices"][0]["memory_bytes"] = bad;
    EXPECT_EQ(error_of([&] { parse_cluster_json(j, "t.json"); }),
              "t.json: devices[0] ('cpu:0'): field 'memory_bytes' must be a positive whole number, got " + bad.dump());
  }
  j = nlohmann::json::parse(kDocExample);
  j["devices"][1]["streams"] = 0;
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "t.json"); }), HasSubstr("field 'streams' must be a positive whole number, got 0"));
  j = nlohmann::json::parse(kDocExample);
  j["links"][0]["bandwidth_ab"] = 1e9;
  EXPECT_THAT(error_of([&] { parse_cluster_json(j, "t.json"); }),
              AllOf(HasSubstr("links[0]"), HasSubstr("'host-memory'"), HasSubstr("not both")));
}

}  // namespace
}  // namespace placer
