// Rendezvous through a TCPStore and one c10d backend per mesh axis.
#include "shardformer/distributed/process_mesh.h"

#include "process_group_impl.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/runtime/activity.h"
#include "shardformer/runtime/cuda_support.h"
#include "shardformer/strings.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

namespace shardformer::distributed {

struct ProcessMesh::Store {
  c10::intrusive_ptr<c10d::Store> store;
  bool serves = false;  // this rank's process serves it
};

namespace {

// The Gloo transport device: GLOO_SOCKET_IFNAME when set, loopback for a local job, else
// the address this host name resolves to.
std::shared_ptr<::gloo::transport::Device> gloo_device(const MeshOptions& options) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (options.master_addr == "127.0.0.1" || options.master_addr == "localhost") {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

struct Rendezvous {
  int rank;
  MeshShape shape;
  MeshOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  std::shared_ptr<::gloo::transport::Device> device;
  std::vector<std::string> hosts;  // per global rank: host name and boot id

  bool on_one_host(const std::vector<int64_t>& members) const {
    for (const int64_t m : members) {
      if (hosts.at(static_cast<size_t>(m)) != hosts.at(static_cast<size_t>(members[0]))) {
        return false;
      }
    }
    return true;
  }

  // The group's shared-memory segment when its CPU ranks share a host (else none).
  void attach_shared_memory(ProcessGroup::Impl& impl, const std::vector<int64_t>& members,
                            const c10::intrusive_ptr<c10d::Store>& prefixed) const {
    // tp and sp carry the large synchronous collectives (activations); world, pp and dp do not.
    if (options.cuda || options.host_staging != MeshOptions::HostStaging::kOff ||
        options.shared_memory_min_bytes < 0 || !on_one_host(members) ||
        (impl.name != "tp" && impl.name != "sp")) {
      return;
    }
    const auto barrier = [&impl] { impl.backend->barrier()->wait(); };
    impl.shared_memory = SharedMemoryTransport::connect(
        impl.rank, impl.size, std::max<int64_t>(options.shared_memory_chunk_bytes, 4096),
        options.timeout, str(impl.name, "-", join(members, "_")),
        [&](const std::string& name) {
          prefixed->set("shared_memory", std::vector<uint8_t>(name.begin(), name.end()));
        },
        [&] {
          const std::vector<uint8_t> bytes = prefixed->get("shared_memory");
          return std::string(bytes.begin(), bytes.end());
        },
        barrier);
    if (impl.shared_memory == nullptr) {
      log::debug(str("group '", impl.name, "': no shared memory, collectives use Gloo"));
      return;
    }
    impl.shared_memory_min_bytes = options.shared_memory_min_bytes;
  }

  // The group of `members` (global ranks, in group-rank order); its store prefix is unique.
  ProcessGroup make_group(const std::string& name, const std::vector<int64_t>& members) {
    auto impl = std::make_shared<ProcessGroup::Impl>();
    impl->name = name;
    impl->size = static_cast<int>(members.size());
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == rank) impl->rank = static_cast<int>(i);
    }
    if (impl->size > 1) {
      const runtime::OperationScope activity(
          "connect_group",
          str("connecting group '", name, "' (ranks ", join(members, ", "),
              ") through the store at ", options.master_addr, ":", options.master_port));
      auto prefixed =
          c10::make_intrusive<c10d::PrefixStore>(str(name, "/", join(members, "_")), store);
      try {
        impl->host_staging = host_staging(name);
        impl->backend = options.cuda && impl->host_staging == MeshOptions::HostStaging::kOff
                            ? nccl_backend(prefixed, impl->rank, impl->size)
                            : gloo_backend(prefixed, impl->rank, impl->size);
        attach_shared_memory(*impl, members, prefixed);
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        const std::string what = e.what();
        throw Error(str("rank ", rank, ": connecting group '", name, "' (ranks ",
                        join(members, ", "), ") through the rendezvous store at ",
                        options.master_addr, ":", options.master_port,
                        " failed (has a rank died?): ", what.substr(0, what.find('\n'))));
      }
    }
    return ProcessGroup(impl);
  }

  // What group `name`'s Gloo backend receives as host copies (kOff on CUDA: NCCL carries it).
  MeshOptions::HostStaging host_staging(const std::string& name) const {
    using enum MeshOptions::HostStaging;
    if (options.host_staging != kOff) return options.host_staging;
    return options.cuda && (name == "pp" || name == "world") ? kCudaTensors : kOff;
  }

  c10::intrusive_ptr<c10d::Backend> gloo_backend(const c10::intrusive_ptr<c10d::Store>& prefixed,
                                                 int group_rank, int group_size) const {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    gloo_options->devices.push_back(device);
    return c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, group_rank, group_size,
                                                       gloo_options);
  }

  // NCCL for CUDA ranks, from the CUDA module (loaded on first use; run where a GPU is).
  c10::intrusive_ptr<c10d::Backend> nccl_backend(const c10::intrusive_ptr<c10d::Store>& prefixed,
                                                 int group_rank, int group_size) const {
    auto backend = runtime::load_cuda_support().nccl_backend(prefixed, group_rank, group_size,
                                                             options.timeout);
    if (!backend) {
      throw Error(
          "this build has no NCCL backend (no NCCL in the torch wheel); use model.device = "
          "\"cpu\"");
    }
    return backend;
  }

  // Members of this rank's group along one axis, in mesh order.
  std::vector<int64_t> axis_members(const std::function<void(MeshCoordinate&, int64_t)>& set,
                                    int64_t axis_size) const {
    std::vector<int64_t> members;
    for (int64_t i = 0; i < axis_size; ++i) {
      MeshCoordinate c = ProcessMesh::coordinate_of(shape, rank);
      set(c, i);
      members.push_back(ProcessMesh::rank_of(shape, c));
    }
    return members;
  }
};

// Whether this rank's process serves the rendezvous store (rank 0, unless the launcher does).
bool serves_store(int rank, const MeshOptions& options) {
  return rank == 0 && !options.launcher_store;
}

c10::intrusive_ptr<c10d::Store> connect_store(int rank, const MeshShape& shape,
                                              const MeshOptions& options) {
  const bool serves = serves_store(rank, options);
  const runtime::OperationScope activity(
      "rendezvous", str("rendezvous at ", options.master_addr, ":", options.master_port, " with ",
                        shape.world_size(), " ranks", serves ? " (serving the store)" : ""));
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options.master_port);
  store_options.isServer = serves;
  store_options.numWorkers = static_cast<size_t>(shape.world_size());
  store_options.waitWorkers = true;
  store_options.timeout = options.timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const std::string reason =
        serves && what.find("EADDRINUSE") != std::string::npos
            ? str("port ", options.master_port, " is already in use on this machine; ")
            : std::string();
    throw Error(str("rank ", rank, ": rendezvous at ", options.master_addr, ":",
                    options.master_port, " with ", shape.world_size(), " ranks failed: ", reason,
                    what.substr(0, what.find('\n'))));
  }
}

// This machine as the ranks compare it: its host name and this boot's id.
std::string host_identity() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  return str(name, "/", boot_id);
}

// The group of one rank, used when an axis has size 1.
ProcessGroup single_rank_group(const std::string& name) {
  auto impl = std::make_shared<ProcessGroup::Impl>();
  impl->name = name;
  return ProcessGroup(impl);
}

// The shape, after checking it and the rank (before anything divides by its sizes).
MeshShape checked_mesh_shape(const MeshShape& shape, int rank) {
  if (shape.dp < 1 || shape.pp < 1 || shape.sp < 1 || shape.tp < 1) {
    throw Error(str("mesh sizes must be >= 1 (dp ", shape.dp, ", pp ", shape.pp, ", sp ", shape.sp,
                    ", tp ", shape.tp, ")"));
  }
  if (rank < 0 || rank >= shape.world_size()) {
    throw Error(str("rank ", rank, " is outside a mesh of ", shape.world_size(), " ranks"));
  }
  return shape;
}

}  // namespace

ProcessMesh::ProcessMesh(int rank, MeshShape shape, const MeshOptions& options)
    : rank_(rank),
      shape_(checked_mesh_shape(shape, rank)),
      coordinate_(coordinate_of(shape, rank)),
      world_(single_rank_group("world")),
      tp_(single_rank_group("tp")),
      pp_(single_rank_group("pp")),
      dp_(single_rank_group("dp")),
      sp_(single_rank_group("sp")) {
  if (shape.world_size() == 1) return;
  // A peer that dies closes its sockets; writing to one must fail the collective with an
  // error, not kill this process with SIGPIPE (Python, PyTorch's usual host, ignores it too).
  std::signal(SIGPIPE, SIG_IGN);
  Rendezvous r{rank, shape, options, connect_store(rank, shape, options), nullptr, {}};
  store_ = std::make_shared<Store>(Store{r.store, serves_store(rank, options)});
  r.device = gloo_device(options);
  r.hosts = exchange("host", host_identity());
  std::vector<int64_t> everyone;
  for (int64_t i = 0; i < shape.world_size(); ++i) everyone.push_back(i);
  // Every rank creates its groups in the same order: world, tp, pp, dp, sp.
  world_ = r.make_group("world", everyone);
  tp_ =
      r.make_group("tp", r.axis_members([](MeshCoordinate& c, int64_t i) { c.tp = i; }, shape.tp));
  pp_ =
      r.make_group("pp", r.axis_members([](MeshCoordinate& c, int64_t i) { c.pp = i; }, shape.pp));
  dp_ =
      r.make_group("dp", r.axis_members([](MeshCoordinate& c, int64_t i) { c.dp = i; }, shape.dp));
  if (shape.sp > 1) {
    sp_ = r.make_group("sp",
                       r.axis_members([](MeshCoordinate& c, int64_t i) { c.sp = i; }, shape.sp));
  }
  // Every rank has connected all of its groups before any goes on: a rank that finished its side
  // of a group's connections and then failed or exited at once (a model refused at build) would
  // otherwise close the sockets of a peer still connecting, failing it with a connection error
  // instead of its own.
  exchange("mesh_ready", "1");
  log::debug(str("mesh ready: dp ", coordinate_.dp, "/", shape.dp, ", pp ", coordinate_.pp, "/",
                 shape.pp, ", sp ", coordinate_.sp, "/", shape.sp, ", tp ", coordinate_.tp, "/",
                 shape.tp));
}

std::vector<std::string> ProcessMesh::exchange(const std::string& key,
                                               const std::string& value) const {
  if (store_ == nullptr) return {value};
  const std::string prefix = str("exchange/", ++exchanges_, "/", key, "/");
  const runtime::OperationScope activity("exchange",
                                         str("exchanging '", key, "' through the store"));
  std::vector<std::string> values;
  try {
    store_->store->set(prefix + std::to_string(rank_),
                       std::vector<uint8_t>(value.begin(), value.end()));
    for (int64_t r = 0; r < shape_.world_size(); ++r) {
      const std::vector<uint8_t> bytes = store_->store->get(prefix + std::to_string(r));
      values.emplace_back(bytes.begin(), bytes.end());
    }
    // The rank serving the store keeps it up until every rank has read (a rank that acts on
    // the values, e.g. exits on a disagreement, must not cut a peer's last read short); a
    // rank that never reads (gone) holds it at most 2 s.
    store_->store->set(prefix + "read/" + std::to_string(rank_), std::vector<uint8_t>{1});
    if (store_->serves) {
      std::vector<std::string> read;
      for (int64_t r = 0; r < shape_.world_size(); ++r) {
        read.push_back(prefix + "read/" + std::to_string(r));
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (!store_->store->check(read) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error(str("rank ", rank_, ": exchanging '", key,
                    "' through the rendezvous store failed: ", what.substr(0, what.find('\n'))));
  }
  return values;
}

}  // namespace shardformer::distributed
