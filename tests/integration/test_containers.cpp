// SPDX-License-Identifier: Apache-2.0
// Jobs in containers: who a process is (its cgroup's container and pod, the
// downward API's pod name), and the runtime library probed through the
// job's own root when its path means nothing in steptrace's mount namespace.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "capture/capture_file.h"
#include "capture/user_note.h"
#include "pipeline/replay.h"
#include "pipeline/pipeline.h"
#include "session/lib_probes.h"
#include "support/shell.h"
#include "support/workload.h"
#include "util/proc_identity.h"
#include "util/sys_root.h"

namespace fs = std::filesystem;
using namespace steptrace;

namespace {
const std::string kUid = "0b6ab1d4-5f1c-4e43-9d2a-5a1b2c3d4e5f";
const std::string kCid = "4f2b7c1e9a0d3b6c8e5f7a2d1c0b9e8f7a6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b";
}  // namespace

TEST_CASE("containers: cgroup paths name the container and the pod in every runtime's form", "[containers]") {
  std::string uid_ = kUid;
  std::replace(uid_.begin(), uid_.end(), '-', '_');
  SECTION("systemd driver, containerd") {
    auto c = container_of_cgroup_path("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid_ +
                                      ".slice/cri-containerd-" + kCid + ".scope");
    CHECK(c.pod_uid == kUid);
    CHECK(c.container_id == kCid);
    CHECK(c.runtime == "containerd");
  }
  SECTION("systemd driver, guaranteed QoS, cri-o; its conmon scope is not the container") {
    auto c = container_of_cgroup_path("/kubepods.slice/kubepods-pod" + uid_ + ".slice/crio-" + kCid + ".scope");
    CHECK(c.pod_uid == kUid);
    CHECK(c.runtime == "cri-o");
    auto conmon = container_of_cgroup_path("/kubepods.slice/kubepods-pod" + uid_ + ".slice/crio-conmon-" + kCid + ".scope");
    CHECK(conmon.pod_uid == kUid);
    CHECK(conmon.container_id.empty());
  }
  SECTION("cgroupfs driver") {
    auto c = container_of_cgroup_path("/kubepods/besteffort/pod" + kUid + "/" + kCid);
    CHECK(c.pod_uid == kUid);
    CHECK(c.container_id == kCid);
    CHECK(c.runtime.empty());
  }
  SECTION("docker and podman outside Kubernetes") {
    auto d = container_of_cgroup_path("/system.slice/docker-" + kCid + ".scope");
    CHECK(d.runtime == "docker");
    CHECK(d.container_id == kCid);
    CHECK(d.pod_uid.empty());
    CHECK(container_of_cgroup_path("/docker/" + kCid).runtime == "docker");
    CHECK(container_of_cgroup_path("/machine.slice/libpod-" + kCid + ".scope").runtime == "podman");
  }
  SECTION("not a container") {
    CHECK_FALSE(container_of_cgroup_path("/user.slice/user-0.slice/session-1.scope").in_container());
    CHECK_FALSE(container_of_cgroup_path("/").in_container());
    CHECK_FALSE(container_of_cgroup_path("/kubepods-burstable-podnothex.slice").in_container());
    CHECK_FALSE(container_of_cgroup_path("/" + kCid).in_container());  // a bare id is a container only under a pod or /docker
  }
  SECTION("the unified line wins over v1 lines; v1 is used when it alone names one") {
    auto v2 = parse_cgroup_container("4:memory:/kubepods/pod" + kUid + "/aaaa\n0::/kubepods/besteffort/pod" + kUid +
                                     "/" + kCid + "\n");
    CHECK(v2.container_id == kCid);
    auto v1 = parse_cgroup_container("4:memory:/kubepods/pod" + kUid + "/" + kCid + "\n0::/\n");
    CHECK(v1.container_id == kCid);
    CHECK(v1.pod_uid == kUid);
  }
}

TEST_CASE("containers: the downward API's pod name, the launcher's rank, and nothing else from the environment",
          "[containers]") {
  std::string env = std::string("PATH=/bin") + '\0' + "POD_NAME=trainer-0" + '\0' + "POD_NAMESPACE=ml" + '\0' +
                    "RANK=3" + '\0' + "WORLD_SIZE=8" + '\0' + "AWS_SECRET_ACCESS_KEY=hunter2" + '\0' +
                    "TORCHELASTIC_RUN_ID=run-7" + '\0' + "HOSTNAME=ignored-when-pod-name-is-set" + '\0';
  auto id = parse_proc_identity(env, "0::/kubepods/besteffort/pod" + kUid + "/" + kCid + "\n");
  CHECK(id.pod_name == "trainer-0");
  CHECK(id.pod_namespace == "ml");
  CHECK(id.job == "run-7");
  CHECK(id.env.at("RANK") == "3");
  CHECK(id.env.at("WORLD_SIZE") == "8");
  CHECK(id.env.count("AWS_SECRET_ACCESS_KEY") == 0);
  CHECK(id.env.count("PATH") == 0);
  CHECK(id.describe() == "pod ml/trainer-0 (uid " + kUid + "), container " + kCid.substr(0, 12));
  // In a pod with no downward API, the hostname is the pod's name.
  auto h = parse_proc_identity(std::string("HOSTNAME=trainer-1") + '\0', "0::/kubepods/pod" + kUid + "/" + kCid);
  CHECK(h.pod_name == "trainer-1");
  // Outside a pod, the hostname is not a pod name; an escape is defused.
  auto plain = parse_proc_identity(std::string("HOSTNAME=box") + '\0' + "RANK=\x1b[2J" + '\0', "0::/user.slice\n");
  CHECK(plain.pod_name.empty());
  CHECK(plain.env.at("RANK") == "\\x1b[2J");
}

TEST_CASE("containers: identity and probe notes go through the record stream and back", "[containers]") {
  ProcIdentity id = parse_proc_identity(std::string("POD_NAME=p") + '\0' + "RANK=1" + '\0',
                                        "0::/kubepods/pod" + kUid + "/" + kCid + "\n");
  Pipeline pipe;
  auto rec = make_user_note(5, 42, identity_note(id));
  REQUIRE(!rec.empty());
  pipe.push(rec.data(), rec.size());
  LibProbeNote p{42, "/opt/neuron/libnrt.so.1", "/proc/42/root/opt/neuron/libnrt.so.1", 3, ""};
  auto prec = make_user_note(6, 42, probe_note(p));
  pipe.push(prec.data(), prec.size());
  // A corrupt note (length past the record) is counted, never parsed.
  auto bad = rec;
  bad[24] = 0xff;
  pipe.push(bad.data(), bad.size());
  const auto& notes = pipe.analysis().notes;
  REQUIRE(notes.identity(42));
  CHECK(notes.identity(42)->container.container_id == kCid);
  CHECK(notes.identity(42)->pod_name == "p");
  CHECK(notes.identity(42)->env.at("RANK") == "1");
  REQUIRE(notes.probes.size() == 1);
  CHECK(notes.probes[0].via == p.via);
  CHECK(notes.probes[0].functions == 3);
  CHECK(notes.malformed == 1);
  CHECK(pipe.decode_stats().unknown_kind == 0);  // notes never reach the decoder
}

TEST_CASE("containers: a parent note names a running process's parent, and a fork seen in the trace wins", "[containers]") {
  // attach: the loaders were forked before tracing began, so no task_new
  // says whose they are; the session reads /proc and notes it.
  Pipeline pipe;
  for (auto [pid, ppid] : {std::pair<uint32_t, uint32_t>{101, 100}, {102, 100}}) {
    auto rec = make_user_note(5, pid, parent_note(ppid));
    pipe.push(rec.data(), rec.size());
  }
  auto zero = make_user_note(5, 103, nlohmann::json{{"note", "parent"}, {"ppid", 0}});
  pipe.push(zero.data(), zero.size());
  auto text = make_user_note(5, 104, nlohmann::json{{"note", "parent"}, {"ppid", "100"}});
  pipe.push(text.data(), text.size());
  const auto& tl = pipe.analysis().timeline;
  CHECK(tl.parent_of(101) == 100);
  CHECK(tl.parent_of(102) == 100);
  CHECK(tl.parent_of(103) == 0);
  CHECK(tl.parent_of(104) == 0);
  CHECK(pipe.analysis().notes.malformed == 2);
  // A parent already known (from the trace) is not replaced by a note.
  TimelineStore t;
  t.note_parent(7, 1);
  t.note_parent(7, 2);
  CHECK(t.parent_of(7) == 1);
}

TEST_CASE("containers: maps lines give the mapped file's device, inode and range", "[containers]") {
  std::string maps =
      "7f0000-7f1000 r-xp 00000000 fd:01 123 /opt/aws/neuron/lib/libnrt.so.1\n"
      "7f1000-7f2000 r--p 00001000 fd:01 123 /opt/aws/neuron/lib/libnrt.so.1\n"
      "7f2000-7f3000 r-xp 00000000 00:2a 99 /usr/lib/libsteptrace_marker.so\n"
      "7f3000-7f4000 r-xp 00000000 fd:01 125 /usr/lib/libnrt.so.2 (deleted)\n"
      "garbage /libnrt.so.1\n";
  auto libs = find_mapped_probe_libs(maps);
  REQUIRE(libs.size() == 2);
  CHECK(libs[0].path == "/opt/aws/neuron/lib/libnrt.so.1");
  CHECK(libs[0].range == "7f0000-7f1000");
  CHECK(libs[0].key() == "fd:1:123");
  CHECK(libs[1].key() == "0:2a:99");
  // The test binary's own maps: its executable resolves through /proc/self/root to the same inode.
  auto self_maps = read_small_file("/proc/self/maps");
  REQUIRE(self_maps);
  CHECK(find_mapped_probe_libs(*self_maps).empty());  // a real maps text, no runtime in it
  MappedLib exe;
  std::string self = fs::read_symlink("/proc/self/exe").string();
  struct stat st {};
  REQUIRE(::stat(self.c_str(), &st) == 0);
  exe.path = self;
  exe.inode = st.st_ino;
  exe.range = "0-0";
  auto where = resolve_mapped_lib("/proc", static_cast<uint32_t>(::getpid()), exe);
  CHECK(where.path == "/proc/" + std::to_string(::getpid()) + "/root" + self);
  exe.inode = st.st_ino + 1;  // another file at that path: refused, and map_files has no such range
  auto other = resolve_mapped_lib("/proc", static_cast<uint32_t>(::getpid()), exe);
  CHECK(other.path.empty());
  CHECK(other.error.find("another file") != std::string::npos);
}

TEST_CASE("containers: a new image's maps are scanned at once, 20 ms later, then backing off until its runtime shows",
          "[containers]") {
  char tmpl[] = "/tmp/st-scanq-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string root = tmpl;
  auto write_maps = [&](uint32_t pid, const std::string& text) {
    fs::create_directories(root + "/" + std::to_string(pid));
    std::ofstream(root + "/" + std::to_string(pid) + "/maps") << text;
  };
  const std::string nothing = "400000-401000 r-xp 00000000 fd:01 7 /usr/bin/python3.11\n";
  write_maps(100, nothing);  // maps its runtime later
  write_maps(200, nothing);  // never does
  constexpr uint64_t ms = 1'000'000;
  const uint64_t t0 = 1000 * ms;
  LibScanQueue q;
  CHECK(q.next_due_ns() == UINT64_MAX);
  q.add(100, t0);
  q.add(200, t0);
  q.add(300, t0);  // gone before its first scan (no /proc entry)
  CHECK(q.next_due_ns() == t0);
  std::vector<std::pair<uint32_t, std::string>> found;
  auto on_found = [&](uint32_t pid, const MappedLib& lib) { found.emplace_back(pid, lib.path); };
  q.scan(t0, root, on_found);
  CHECK(found.empty());
  CHECK(q.next_due_ns() == t0 + 20 * ms);  // the first rescan: 20 ms after the exec's scan
  write_maps(100, nothing + "7f0000-7f1000 r-xp 00000000 fd:01 123 /opt/aws/neuron/lib/libnrt.so.1\n");
  q.scan(t0 + 19 * ms, root, on_found);  // not due yet: nothing read
  CHECK(found.empty());
  q.scan(t0 + 20 * ms, root, on_found);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == std::make_pair(100u, std::string("/opt/aws/neuron/lib/libnrt.so.1")));
  CHECK(q.next_due_ns() == t0 + 60 * ms);  // 200 backs off: 40 ms next
  uint64_t now = t0 + 60 * ms, scans = 2;
  while (!q.empty() && now < t0 + 10'000 * ms) {  // 200 is given up on 5 s after it was added
    q.scan(now, root, on_found);
    ++scans;
    now = q.next_due_ns();
  }
  CHECK(q.empty());
  CHECK(now == UINT64_MAX);
  CHECK(scans >= 10);  // 20, 40, 80, 160, 320, then every 500 ms
  CHECK(scans <= 17);
  CHECK(found.size() == 1);
  fs::remove_all(root);
}

TEST_CASE("containers: a process's first device call rescans its maps once per image, and its exit forgets it",
          "[containers]") {
  DeviceCallRescans r(2);
  CHECK(r.first_call(10));
  CHECK_FALSE(r.first_call(10));  // its later calls read nothing
  r.forget(10);                   // an exec: the new image may load its own runtime
  CHECK(r.first_call(10));
  CHECK(r.first_call(11));
  CHECK_FALSE(r.first_call(12));  // full: bounded
  r.forget(11);                   // an exit frees its place
  CHECK(r.first_call(12));
  CHECK(r.size() == 2);
  st_task_exit e{};
  e.hdr.kind = ST_EV_TASK_EXIT;
  CHECK_FALSE(exit_ends_process(&e, sizeof(e)));  // a thread of a live process
  e.flags = ST_EXIT_GROUP_DEAD;
  CHECK(exit_ends_process(&e, sizeof(e)));
  CHECK_FALSE(exit_ends_process(&e, sizeof(e) - 1));  // a short record is not read
}

namespace {

// The cgroup v2 hierarchy, else a v1 one (named in the process's cgroup file either way).
std::string cgroup_mount() {
  std::ifstream mi("/proc/self/mountinfo");
  std::string line, v1;
  while (std::getline(mi, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream pre(line.substr(0, dash)), post(line.substr(dash + 3));
    std::string a, b, c, root, target, fstype;
    pre >> a >> b >> c >> root >> target;
    post >> fstype;
    if (fstype == "cgroup2") return target;
    if (fstype == "cgroup" && v1.empty() && line.find("pids") != std::string::npos) v1 = target;
  }
  return v1;
}

}  // namespace

// attach --pod resolves a pod by name, namespace/name or UID to its cgroup
// (v2 here: the kernel's cgroup filter then follows what it starts); a pod
// that is not on the node is an error that says what is.
TEST_CASE("containers: attach --pod and --container trace the pod's processes and name what is not there",
          "[root][containers]") {
  test::require_root();
  const std::string cgroot = cgroup_mount();
  REQUIRE(!cgroot.empty());
  const std::string uid = "7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d";
  std::string uid_ = uid;
  std::replace(uid_.begin(), uid_.end(), '-', '_');
  const std::string cid(64, 'e');
  const fs::path pod = fs::path(cgroot) / "kubepods.slice" / ("kubepods-pod" + uid_ + ".slice");
  const fs::path scope = pod / ("cri-containerd-" + cid + ".scope");
  fs::create_directories(scope);
  char tmpl[] = "/tmp/st-pod.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const fs::path w = tmpl;
  {
    std::ofstream f(w / "job.sh");
    f << "echo $$ > " << (scope / "cgroup.procs").string() << " || exit 1\n"
      << "exec env POD_NAME=trainer-9 POD_NAMESPACE=ml sh -c 'end=$(($(date +%s) + 60)); "
         "while [ $(date +%s) -lt $end ]; do :; done'\n";
  }
  auto job = test::sh("(/bin/sh " + (w / "job.sh").string() + " >/dev/null 2>&1 &) ; sleep 0.5; cat " +
                      (scope / "cgroup.procs").string());
  REQUIRE(job.rc == 0);
  const std::string job_pid = job.out.substr(0, job.out.find('\n'));
  REQUIRE(!job_pid.empty());
  for (const std::string& sel : {std::string("--pod ml/trainer-9"), "--pod " + uid, "--container " + cid.substr(0, 12)}) {
    auto r = test::sh(std::string(STEPTRACE_BIN) + " attach " + sel + " -d 1 --collectors sched --json " +
                      (w / "r.json").string() + " 2>&1");
    INFO(sel << "\n" << r.out);
    CHECK(r.rc == 0);
    auto j = nlohmann::json::parse(test::slurp((w / "r.json").string()), nullptr, false);
    REQUIRE(j.is_object());
    bool traced = false;
    for (const auto& t : j["threads"]) traced |= std::to_string(t["pid"].get<int>()) == job_pid;
    CHECK(traced);
    fs::remove(w / "r.json");
  }
  auto none = test::sh(std::string(STEPTRACE_BIN) + " attach --pod ml/no-such-pod -d 1 2>&1");
  CHECK(none.rc == 1);
  CHECK(none.out.find("pod ml/no-such-pod: no process on this node is in it") != std::string::npos);
  CHECK(none.out.find("ml/trainer-9") != std::string::npos);  // what is on the node
  auto bad = test::sh(std::string(STEPTRACE_BIN) + " attach --container xyz -d 1 2>&1");
  CHECK(bad.rc == 2);  // a usage error
  CHECK(bad.out.find("12 or more lowercase hex digits") != std::string::npos);
  ::kill(std::stoi(job_pid), SIGKILL);
  test::sh("sleep 0.2");
  std::error_code ec;
  fs::remove(scope, ec);
  fs::remove(pod, ec);
  fs::remove(pod.parent_path(), ec);
  fs::remove_all(w, ec);
}

#ifdef TRAINSIM_BIN
// The job runs in its own mount namespace: its runtime library lives on a
// mount steptrace's namespace does not have, at a path that is an empty
// directory on the host. Before, the uprobes failed on that path and the
// steps silently came from the device's queue kicks.
TEST_CASE("containers: a job in its own mount namespace gets runtime probes through its root, named by its pod",
          "[root][containers]") {
  test::require_root();
  char tmpl[] = "/tmp/st-container.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const fs::path w = tmpl;
  const fs::path ct = w / "ct", devs = w / "devs";
  fs::create_directories(ct);
  fs::create_directories(devs / "d");
  // The device's FUSE mount must reach the host (steptrace matches --accel-dev
  // by the file it finds): the dev dir is a shared mount, the rest private.
  REQUIRE(::mount(devs.c_str(), devs.c_str(), nullptr, MS_BIND, nullptr) == 0);
  REQUIRE(::mount(nullptr, devs.c_str(), nullptr, MS_SHARED, nullptr) == 0);
  const std::string cgroot = cgroup_mount();
  REQUIRE(!cgroot.empty());
  std::string uid_ = kUid;
  std::replace(uid_.begin(), uid_.end(), '-', '_');
  const fs::path pod = fs::path(cgroot) / "kubepods.slice" / "kubepods-burstable.slice" /
                       ("kubepods-burstable-pod" + uid_ + ".slice");
  const fs::path scope = pod / ("cri-containerd-" + kCid + ".scope");
  fs::create_directories(scope);
  const std::string sim_dir = fs::path(TRAINSIM_BIN).parent_path().string();
  const std::string inner = "mount -t tmpfs tmpfs " + ct.string() + " && mkdir -p " + ct.string() +
                            "/opt/neuron && mount --bind " + sim_dir + " " + ct.string() +
                            "/opt/neuron && exec env POD_NAME=trainer-0 POD_NAMESPACE=ml " + ct.string() +
                            "/opt/neuron/trainsim --scenario compute-bound --ranks 2 --duration 4 --dev-dir " +
                            (devs / "d").string();
  {
    std::ofstream f(w / "job.sh");
    f << "echo $$ > " << (scope / "cgroup.procs").string() << " || exit 1\n"
      << "exec unshare -m --propagation unchanged sh -c '" << inner << "'\n";
  }
  auto r = test::sh(std::string(STEPTRACE_BIN) + " run --collectors accel,uprobe --accel-dev " +
                    (devs / "d" / "neuron0").string() + " --accel-dev " + (devs / "d" / "neuron1").string() +
                    " --json " + (w / "r.json").string() + " -- /bin/sh " + (w / "job.sh").string() + " 2>&1");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_FALSE(fs::exists(ct / "opt" / "neuron" / "libnrt.so.1"));  // absent in our namespace
  CHECK(r.out.find("pod ml/trainer-0 (uid " + kUid + ")") != std::string::npos);
  CHECK(r.out.find("container containerd " + kCid.substr(0, 12)) != std::string::npos);
  auto j = nlohmann::json::parse(test::slurp((w / "r.json").string()), nullptr, false);
  REQUIRE(j.is_object());
  const auto& ranks = j["job"]["ranks"];
  REQUIRE(ranks.size() == 2);
  for (const auto& rk : ranks) {
    CHECK(rk["step_source"] == "runtime probes (nrt_execute)");
    CHECK(rk["steps"].size() >= 20);
    const std::string why = rk["step_source_reason"];
    CHECK(why.find(ct.string() + "/opt/neuron/libnrt.so.1 through /proc/") != std::string::npos);
    CHECK(why.find("/root" + ct.string()) != std::string::npos);
    CHECK(rk["identity"]["pod_uid"] == kUid);
    CHECK(rk["identity"]["container_id"] == kCid);
    CHECK(rk["identity"]["runtime"] == "containerd");
    CHECK(rk["identity"]["pod_name"] == "trainer-0");
    CHECK(rk["identity"]["pod_namespace"] == "ml");
  }
  CHECK(j["source"]["host"].get<std::string>().size() > 0);
  CHECK(j["source"]["t0_wall_clock"].get<std::string>().find("T") == 10);
  ::umount2(devs.c_str(), MNT_DETACH);
  std::error_code ec;
  for (auto p = scope; p != fs::path(cgroot); p = p.parent_path()) fs::remove(p, ec);
  fs::remove_all(w, ec);
}
#endif

TEST_CASE("containers: a capture replays the notes of its processes", "[containers]") {
  char tmpl[] = "/tmp/st-notes.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string path = std::string(tmpl) + "/n.cap";
  auto w = CaptureWriter::create(path, nlohmann::json{{"host", "h1"}, {"kernel", "6.1.0"},
                                                      {"steptrace_version", "9.9.9"},
                                                      {"realtime_minus_monotonic_ns", 1'700'000'000'000'000'000LL}});
  REQUIRE(w.ok());
  ProcIdentity id = parse_proc_identity(std::string("POD_NAME=p") + '\0', "0::/docker/" + kCid + "\n");
  auto rec = make_user_note(5, 7, identity_note(id));
  REQUIRE((*w)->append(rec.data(), rec.size()).ok());
  REQUIRE((*w)->close(DropStats{}, 10).ok());
  auto r = replay_capture(path);
  REQUIRE(r.ok());
  REQUIRE(r->analysis.notes.identity(7));
  CHECK(r->analysis.notes.identity(7)->container.runtime == "docker");
  CHECK(r->source.host == "h1");
  CHECK(r->source.recorded_by == "9.9.9");
  CHECK(r->decode.unknown_kind == 0);
  std::error_code ec;
  fs::remove_all(tmpl, ec);
}
