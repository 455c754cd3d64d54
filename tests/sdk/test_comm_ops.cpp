// The process mesh and the tensor-parallel comm ops at 2 and 4 ranks: groups follow the
// dp x pp x tp layout, each op's output and gradients equal the unsharded computation, and a
// rank that fails makes its peers' collectives fail fast instead of hanging.
#include "multiprocess.h"
#include "shardformer/distributed/comm_ops.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/error.h"
#include "tensor_util.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

using namespace shardformer::distributed;
using shardformer::testing::expect_all_ranks_passed;
using shardformer::testing::run_ranks;

namespace {

MeshOptions local(int port, std::chrono::seconds timeout = std::chrono::seconds(60)) {
  MeshOptions options;
  options.master_port = port;
  options.timeout = timeout;
  return options;
}

// Options whose collectives all go through shared memory, in rounds of 4 KiB per rank (1024
// floats): small tensors then take several rounds.
MeshOptions small_slots(int port) {
  MeshOptions options = local(port);
  options.shared_memory_min_bytes = 0;
  options.shared_memory_chunk_bytes = 4096;
  return options;
}

// The same random tensor on every rank (and a different one per `seed`).
using shardformer::testing::seeded;

void expect_allclose(const at::Tensor& actual, const at::Tensor& expected, const char* what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(at::allclose(actual, expected, 1e-6, 1e-6))
      << what << ": max diff " << (actual - expected).abs().max().item<double>();
}

class CommOps : public ::testing::TestWithParam<int> {};

}  // namespace

TEST(ProcessMesh, CoordinatesPutTensorParallelInnermost) {
  const MeshShape shape{.dp = 2, .pp = 3, .tp = 2};
  for (int64_t rank = 0; rank < shape.world_size(); ++rank) {
    EXPECT_EQ(ProcessMesh::rank_of(shape, ProcessMesh::coordinate_of(shape, rank)), rank);
  }
  const MeshCoordinate c = ProcessMesh::coordinate_of(shape, 7);  // 7 = (1 * 3 + 0) * 2 + 1
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 0);
  EXPECT_EQ(c.tp, 1);
}

TEST(ProcessMesh, GroupsFollowTheLayoutAt8Ranks) {
  const MeshShape shape{.dp = 2, .pp = 2, .tp = 2};
  expect_all_ranks_passed(run_ranks(8, [&](int rank, int port) {
    const ProcessMesh mesh(rank, shape, local(port));
    const MeshCoordinate me = mesh.coordinate();
    const auto members = [&](const ProcessGroup& group) {
      return group.all_gather(at::full({1}, static_cast<int64_t>(rank), at::kLong), 0);
    };
    const auto expected = [&](auto set) {
      std::vector<int64_t> ranks;
      for (int64_t i = 0; i < 2; ++i) {
        MeshCoordinate c = me;
        set(c, i);
        ranks.push_back(ProcessMesh::rank_of(shape, c));
      }
      return at::tensor(ranks, at::kLong);
    };
    EXPECT_TRUE(at::equal(members(mesh.tp()), expected([](auto& c, int64_t i) { c.tp = i; })));
    EXPECT_TRUE(at::equal(members(mesh.pp()), expected([](auto& c, int64_t i) { c.pp = i; })));
    EXPECT_TRUE(at::equal(members(mesh.dp()), expected([](auto& c, int64_t i) { c.dp = i; })));
    EXPECT_EQ(mesh.tp().rank(), me.tp);
    EXPECT_EQ(mesh.world().size(), 8);
  }));
}

TEST_P(CommOps, CopyToIsIdentityForwardAndAllReduceBackward) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, local(port));
    const at::Tensor x = seeded(1, {2, 3, 8}).requires_grad_(true);  // [batch, seq, hidden]
    const at::Tensor y = copy_to_parallel_region(x, mesh.tp());
    expect_allclose(y, x, "forward");
    (y * seeded(100 + rank, {2, 3, 8})).sum().backward();
    at::Tensor expected = at::zeros({2, 3, 8});
    for (int r = 0; r < world; ++r) expected += seeded(100 + r, {2, 3, 8});
    expect_allclose(x.grad(), expected, "input grad");
  }));
}

TEST_P(CommOps, ReduceFromSumsForwardAndPassesGradientBack) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, local(port));
    const at::Tensor x = seeded(10 + rank, {2, 3, 8}).requires_grad_(true);
    const at::Tensor y = reduce_from_parallel_region(x, mesh.tp());
    at::Tensor expected = at::zeros({2, 3, 8});
    for (int r = 0; r < world; ++r) expected += seeded(10 + r, {2, 3, 8});
    expect_allclose(y, expected, "forward");
    const at::Tensor upstream = seeded(7, {2, 3, 8});
    (y * upstream).sum().backward();
    expect_allclose(x.grad(), upstream, "input grad");
    EXPECT_EQ(mesh.tp().stats().all_reduces, 1);
    EXPECT_EQ(mesh.tp().stats().all_reduce_elements, 2 * 3 * 8);
  }));
}

TEST_P(CommOps, GatherFromConcatenatesShardsAndSlicesTheGradient) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, local(port));
    const at::Tensor full = seeded(3, {2, 3, 4 * world});  // [.., hidden]
    const at::Tensor x =
        full.chunk(world, -1)[rank].clone().requires_grad_(true);  // [.., hidden/tp]
    const at::Tensor y = gather_from_parallel_region(x, mesh.tp());
    expect_allclose(y, full, "forward");
    const at::Tensor upstream = seeded(4, {2, 3, 4 * world});
    (y * upstream).sum().backward();
    expect_allclose(x.grad(), upstream.chunk(world, -1)[rank], "input grad");
  }));
}

TEST_P(CommOps, ScatterToSlicesForwardAndGathersTheGradient) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, local(port));
    const at::Tensor x = seeded(5, {2, 3, 4 * world}).requires_grad_(true);
    const at::Tensor y = scatter_to_parallel_region(x, mesh.tp());
    expect_allclose(y, x.detach().chunk(world, -1)[rank], "forward");
    (y * seeded(200 + rank, {2, 3, 4})).sum().backward();
    std::vector<at::Tensor> pieces;
    for (int r = 0; r < world; ++r) pieces.push_back(seeded(200 + r, {2, 3, 4}));
    expect_allclose(x.grad(), at::cat(pieces, -1), "input grad");
  }));
}

// Two banks of slots and one barrier per round: a rank that runs ahead writes the other bank
// while its peers still read this one. 300 mixed collectives of one to three rounds, each rank
// pausing at random between them (a few microseconds to a millisecond), must all give the
// rank-order results bit for bit.
TEST_P(CommOps, SharedMemoryRoundsStayExactWhenRanksDrift) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, small_slots(port));
    ASSERT_TRUE(mesh.tp().shared_memory());
    std::mt19937 pause(1234u + static_cast<unsigned>(rank));
    for (int i = 0; i < 300; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(pause() % 1000));
      const int64_t n = 500 + 700 * (i % 4);  // one to three rounds
      if (i % 5 == 3) {                       // sequence parallelism's pair, 20 rows of 50 a round
        std::vector<at::Tensor> parts;
        for (int r = 0; r < world; ++r) parts.push_back(seeded(1000 * i + r, {2, 10, 50}));
        at::Tensor consumed = at::empty({20 * world, 50});
        mesh.tp().all_gather_consumed(parts[rank], [&](int64_t first, const at::Tensor& block) {
          consumed.narrow(0, first, block.size(0)).copy_(block);
        });
        EXPECT_TRUE(at::equal(consumed, at::cat(parts, 1).view({-1, 50})))
            << "all_gather_consumed " << i;
        std::vector<at::Tensor> terms;  // [2, 10 x world, 50]
        for (int r = 0; r < world; ++r)
          terms.push_back(seeded(1000 * i + 100 + r, {2, 10 * world, 50}));
        at::Tensor want = terms[0];
        for (int r = 1; r < world; ++r) want = want + terms[r];
        const at::Tensor mine = mesh.tp().reduce_scatter_produced(
            2, 10 * world, 50, at::kFloat,
            [&](int64_t first, at::Tensor& block) {
              block.copy_(terms[rank].view({-1, 50}).narrow(0, first, block.size(0)));
            },
            {});
        EXPECT_TRUE(at::equal(mine, want.narrow(1, rank * 10, 10)))
            << "reduce_scatter_produced " << i;
      } else if (i % 3 == 2) {
        std::vector<at::Tensor> parts;
        for (int r = 0; r < world; ++r) parts.push_back(seeded(1000 * i + r, {n}));
        EXPECT_TRUE(at::equal(mesh.tp().all_gather(parts[rank], 0), at::cat(parts)))
            << "all_gather " << i;
      } else {
        at::Tensor want = seeded(1000 * i, {n});
        for (int r = 1; r < world; ++r) want = want + seeded(1000 * i + r, {n});
        at::Tensor mine = seeded(1000 * i + rank, {n});
        if (i % 3 == 0) {
          mesh.tp().all_reduce_(mine);
        } else {
          mine = mesh.tp()
                     .sum_produced(n / 10, 10, at::kFloat,
                                   [&](int64_t first, at::Tensor& block) {
                                     block.copy_(seeded(1000 * i + rank, {n})
                                                     .view({-1, 10})
                                                     .narrow(0, first, block.size(0)));
                                   },
                                   {})
                     .view({-1});
        }
        EXPECT_TRUE(at::equal(mine, want)) << "sum " << i;
      }
    }
  }));
}

// Without shared memory (Gloo) the producing collectives give the same results: the sum plus
// the bias on every rank, the gathered blocks on rank 0 only.
TEST_P(CommOps, ProducedSumAndGatherOverGlooMatchTheirDefinitions) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    MeshOptions options = local(port);
    options.shared_memory_min_bytes = -1;
    const ProcessMesh mesh(rank, {.tp = world}, options);
    ASSERT_FALSE(mesh.tp().shared_memory());
    const at::Tensor bias = seeded(60, {9});
    at::Tensor want = seeded(61, {5, 9});
    for (int r = 1; r < world; ++r) want = want + seeded(61 + r, {5, 9});
    const at::Tensor sum = mesh.tp().sum_produced(
        5, 9, at::kFloat,
        [&](int64_t first, at::Tensor& block) {
          block.copy_(seeded(61 + rank, {5, 9}).narrow(0, first, block.size(0)));
        },
        bias);
    EXPECT_TRUE(at::allclose(sum, want + bias)) << "sum_produced";
    std::vector<at::Tensor> blocks;
    for (int r = 0; r < world; ++r) blocks.push_back(seeded(70 + r, {5, 3}));
    const at::Tensor gathered = mesh.tp().gather_produced_to_first(
        5, 3, at::kFloat, [&](at::Tensor& block) { block.copy_(blocks[rank]); });
    if (rank == 0) {
      EXPECT_TRUE(at::equal(gathered, at::cat(blocks, 1))) << "gather_produced_to_first";
    } else {
      EXPECT_FALSE(gathered.defined());
    }
  }));
}

namespace {

// The sequence-parallel producing collectives on `group`, checked against their definitions:
// reduce_scatter_produced of [3, 7 x size, cols] terms gives this rank's [3, 7, cols] slice of
// the rank-order sum plus the bias (bit for bit where `exact`), and all_gather_consumed of [3,
// 7, cols] inputs hands every row of their concatenation along dim 1 to the consumer once.
void check_sequence_collectives(const ProcessGroup& group, int64_t cols, bool exact) {
  const int rank = group.rank(), size = group.size();
  const int64_t outer = 3, local = 7, length = local * size;
  const at::Tensor bias = seeded(80, {cols});
  at::Tensor sum = seeded(81, {outer, length, cols});
  for (int r = 1; r < size; ++r) sum = sum + seeded(81 + r, {outer, length, cols});
  const at::Tensor want = sum.narrow(1, rank * local, local) + bias;
  const at::Tensor term = seeded(81 + rank, {outer * length, cols});
  int64_t produced = 0;
  const at::Tensor got = group.reduce_scatter_produced(
      outer, length, cols, term.options(),
      [&](int64_t first, at::Tensor& block) {
        block.copy_(term.narrow(0, first, block.size(0)));
        produced += block.size(0);
      },
      bias);
  EXPECT_EQ(produced, outer * length) << cols << " columns";
  EXPECT_TRUE(exact ? at::equal(got, want) : at::allclose(got, want, 1e-5, 1e-5))
      << "reduce_scatter_produced of " << cols
      << " columns: " << (got - want).abs().max().item<double>();
  std::vector<at::Tensor> inputs;
  for (int r = 0; r < size; ++r) inputs.push_back(seeded(90 + r, {outer, local, cols}));
  at::Tensor consumed = at::full({outer * length, cols}, -7.f);
  at::Tensor times = at::zeros({outer * length}, at::kLong);
  group.all_gather_consumed(inputs[rank], [&](int64_t first, const at::Tensor& block) {
    consumed.narrow(0, first, block.size(0)).copy_(block);
    times.narrow(0, first, block.size(0)).add_(1);
  });
  EXPECT_TRUE(at::equal(consumed, at::cat(inputs, 1).view({-1, cols})))
      << "all_gather_consumed of " << cols << " columns";
  EXPECT_TRUE(at::equal(times, at::ones_like(times))) << "rows consumed other than once";
}

}  // namespace

// Sequence parallelism's producing collectives through shared memory: slots of 4 KiB make a
// [3, 14 or 28, 50] term several rounds whose blocks end inside a rank's rows; rows wider than
// a slot (2000 floats) fall back to the plain collectives. Then the same over Gloo.
TEST_P(CommOps, SequenceSplitCollectivesEqualTheirDefinitions) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, small_slots(port));
    ASSERT_TRUE(mesh.tp().shared_memory());
    check_sequence_collectives(mesh.tp(), 50, /*exact=*/true);
    check_sequence_collectives(mesh.tp(), 2000, /*exact=*/false);
  }));
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    MeshOptions options = local(port);
    options.shared_memory_min_bytes = -1;
    const ProcessMesh mesh(rank, {.tp = world}, options);
    ASSERT_FALSE(mesh.tp().shared_memory());
    check_sequence_collectives(mesh.tp(), 50, /*exact=*/false);
  }));
}

TEST(ProcessGroupP2P, SendAndRecvAlongThePipelineAxis) {
  expect_all_ranks_passed(run_ranks(4, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.pp = 2, .tp = 2}, local(port));
    const ProcessGroup& pp = mesh.pp();
    if (pp.rank() == 0) {
      pp.send(seeded(50 + mesh.coordinate().tp, {2, 3, 8}), 1);
    } else {
      at::Tensor received = at::empty({2, 3, 8});
      pp.recv_(received, 0);
      expect_allclose(received, seeded(50 + mesh.coordinate().tp, {2, 3, 8}), "received");
    }
    EXPECT_THROW(pp.send(at::ones({1}), pp.rank()), shardformer::Error);
  }));
}

// Ranks on one host exchange large tensors through shared memory: slots of 4 KiB force many
// chunks, rows split across chunks and uneven tails; the results equal the concatenation and
// the rank-order sum bit for bit, and the segment's name is gone once the mesh is built.
TEST_P(CommOps, SharedMemoryAllGatherAndAllReduceEqualTheirDefinitions) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, small_slots(port));
    ASSERT_TRUE(mesh.tp().shared_memory());
    if (rank == 0) {
      const std::string mine = "-" + std::to_string(::getpid()) + "-";
      for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
        const std::string name = entry.path().filename().string();
        EXPECT_FALSE(name.starts_with("shardformer-") && name.find(mine) != std::string::npos)
            << name << " outlived the mesh's set-up";
      }
    }
    for (const auto& shape : std::vector<std::vector<int64_t>>{{3, 5, 700}, {40, 6}, {1}}) {
      for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
        std::vector<at::Tensor> inputs;
        for (int r = 0; r < world; ++r) inputs.push_back(seeded(10 + r, shape));
        const at::Tensor gathered = mesh.tp().all_gather(inputs[rank], dim);
        EXPECT_TRUE(at::equal(gathered, at::cat(inputs, dim)))
            << "all_gather of " << at::IntArrayRef(shape) << " along " << dim;
      }
    }
    at::Tensor sum = seeded(20, {3001});
    for (int r = 1; r < world; ++r) sum = sum + seeded(20 + r, {3001});
    at::Tensor reduced = seeded(20 + rank, {3001});
    mesh.tp().all_reduce_(reduced);
    EXPECT_TRUE(at::equal(reduced, sum)) << (reduced - sum).abs().max().item<double>();
    // In place: each rank's block already sits in its columns of the output (as the LM head's
    // product writes it); the others' are filled in around it.
    std::vector<at::Tensor> blocks;
    for (int r = 0; r < world; ++r) blocks.push_back(seeded(30 + r, {3, 5, 700}));
    at::Tensor output = at::full({3, 5, 700 * world}, -7.f);
    output.narrow(2, 700 * rank, 700).copy_(blocks[rank]);
    mesh.tp().all_gather_in_place(output, -1);
    EXPECT_TRUE(at::equal(output, at::cat(blocks, 2))) << "all_gather_in_place";
    // To rank 0 only, each rank writing its block where it is handed one: rank 0 holds every
    // block, the others nothing.
    const auto to_first = [&] {
      return mesh.tp().gather_produced_to_first(15, 700, at::kFloat, [&](at::Tensor& block) {
        block.copy_(blocks[rank].view({15, 700}));
      });
    };
    const auto expect_gathered = [&](const at::Tensor& got, double scale, const char* what) {
      if (rank == 0) {
        EXPECT_TRUE(at::equal(got, at::cat(blocks, 2).view({15, -1}) * scale)) << what;
      } else {
        EXPECT_FALSE(got.defined()) << what;
      }
    };
    {
      const at::Tensor first = to_first();
      // Through the output arena: a shared mapping whose name is removed once every rank has it.
      std::ifstream maps("/proc/self/maps");
      std::string line;
      bool arena = false;
      while (std::getline(maps, line)) arena = arena || line.find("-out-") != std::string::npos;
      EXPECT_TRUE(arena) << "rank " << rank << " has no output arena mapped";
      expect_gathered(first, 1, "gathered to rank 0");
      // While rank 0 keeps that output, the next gather cannot use its memory (it goes through
      // the slots): both hold their own blocks.
      for (at::Tensor& b : blocks) b.mul_(-2);
      const at::Tensor second = to_first();
      expect_gathered(second, 1, "second gather");
      expect_gathered(first, -0.5, "first gather, kept");
    }
    for (at::Tensor& b : blocks) b.mul_(3);
    expect_gathered(to_first(), 1, "third gather, in the arena again");
    // A sum each rank produces into the blocks it is handed: 37 rows of 100 floats in slots of
    // 4 KiB are 4 rounds, and a bias added after the sum; rows wider than a slot (2000 floats)
    // are produced whole and all-reduced. Bit for bit the rank-order sum plus the bias.
    for (const int64_t cols : {100, 2000}) {
      const at::Tensor bias = seeded(40, {cols});
      at::Tensor want = seeded(41, {37, cols});
      for (int r = 1; r < world; ++r) want = want + seeded(41 + r, {37, cols});
      want = want + bias;
      const at::Tensor term = seeded(41 + rank, {37, cols});
      int64_t produced = 0;
      const at::Tensor got = mesh.tp().sum_produced(
          37, cols, term.options(),
          [&](int64_t first, at::Tensor& block) {
            block.copy_(term.narrow(0, first, block.size(0)));
            produced += block.size(0);
          },
          bias);
      EXPECT_EQ(produced, 37) << cols << " columns";
      EXPECT_TRUE(at::equal(got, want))
          << "sum_produced of " << cols << " columns: " << (got - want).abs().max().item<double>();
    }
    EXPECT_EQ(mesh.tp().stats().all_gathers, 10);
    EXPECT_EQ(mesh.tp().stats().all_reduces, 3);
  }));
}

// Ulysses' all-to-all and mixed precision's bf16 / fp16 sums through the slots: every block in
// its place after rounds of a slot's columns (a [3, 5, 700] block per rank takes 11 to 83
// rounds of 4 KiB, by dtype and ranks), any dtype; half-precision sums equal the fp32
// rank-order sum rounded once (as Gloo sums two ranks' halves: widened, added, rounded).
TEST_P(CommOps, SharedMemoryAllToAllAndHalfSumsEqualTheirDefinitions) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, small_slots(port));
    ASSERT_TRUE(mesh.tp().shared_memory());
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
      std::vector<at::Tensor> inputs;  // [world * 3, 5, 700] per rank
      for (int r = 0; r < world; ++r) {
        inputs.push_back((seeded(60 + r, {world * 3, 5, 700}) * 100).to(dtype));
      }
      std::vector<at::Tensor> to_me;
      for (int r = 0; r < world; ++r) to_me.push_back(inputs[r].narrow(0, rank * 3, 3));
      EXPECT_TRUE(at::equal(mesh.tp().all_to_all(inputs[rank]), at::cat(to_me, 0)))
          << "all_to_all of " << dtype;
    }
    for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
      at::Tensor want = seeded(70, {2, 1500}).to(dtype).to(at::kFloat);
      for (int r = 1; r < world; ++r)
        want = want + seeded(70 + r, {2, 1500}).to(dtype).to(at::kFloat);
      at::Tensor reduced = seeded(70 + rank, {2, 1500}).to(dtype);
      mesh.tp().all_reduce_(reduced);
      EXPECT_EQ(reduced.scalar_type(), dtype);
      EXPECT_TRUE(at::equal(reduced, want.to(dtype))) << "all_reduce_ of " << dtype;
    }
    EXPECT_EQ(mesh.tp().stats().all_to_alls, 3);
    EXPECT_EQ(mesh.tp().stats().all_reduces, 2);
  }));
}

namespace {

// sum_produced_shared of [250, 10] terms into two outputs (the sum, and the sum plus 1) on
// `group`, checked on every rank against the rank-order sum (bit for bit where `exact`: Gloo
// adds in its own order); returns them and the rows this rank finished (1 each, by index).
// `delay` runs before this rank produces the block starting at `delayed_row`.
std::pair<std::vector<at::Tensor>, at::Tensor> check_shared_sum(
    const ProcessGroup& group, int64_t seed, bool exact = true,
    const std::function<void()>& delay = {}, int64_t delayed_row = -1) {
  const int64_t rows = 250, cols = 10;
  const at::Tensor term = seeded(seed + group.rank(), {rows, cols});
  at::Tensor want = seeded(seed, {rows, cols});
  for (int r = 1; r < group.size(); ++r) want = want + seeded(seed + r, {rows, cols});
  at::Tensor finished = at::zeros({rows});
  std::vector<at::Tensor> outs = group.sum_produced_shared(
      rows, cols, at::kFloat, 2,
      [&](int64_t first, at::Tensor& block) {
        if (first == delayed_row && delay) delay();
        block.copy_(term.narrow(0, first, block.size(0)));
      },
      [&](int64_t first, const std::vector<at::Tensor>& terms, const std::vector<at::Tensor>& o) {
        const int64_t n = terms.front().size(0);
        EXPECT_EQ(o[0].size(0), n);
        at::Tensor sum = terms[0].clone();  // rank order, as `want`
        for (size_t r = 1; r < terms.size(); ++r) sum += terms[r];
        o[0].copy_(sum);
        o[1].copy_(sum + 1);
        ASSERT_GE(first, 0);
        ASSERT_LE(first + n, rows);
        finished.narrow(0, first, n).add_(1);
      });
  EXPECT_EQ(outs.size(), 2u);
  const auto same = [exact](const at::Tensor& a, const at::Tensor& b) {
    return exact ? at::equal(a, b) : at::allclose(a, b, 1e-6, 1e-5);
  };
  EXPECT_TRUE(same(outs[0], want)) << "seed " << seed;
  EXPECT_TRUE(same(outs[1], want + 1)) << "seed " << seed;
  return {outs, finished};
}

}  // namespace

// The shared sums: through shared memory each row is finished by one rank (slots of 1024
// floats: rounds of 102, 102 and 46 rows, the third reusing the first's bank) and every rank
// reads all of them; outputs held by a rank keep their values while later calls take other
// buffers (and the held ones again once freed). Over Gloo every rank finishes all rows, with
// the same results.
TEST_P(CommOps, SharedSumsAreFinishedOnceAndReadByEveryRank) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, small_slots(port));
    ASSERT_TRUE(mesh.tp().shared_memory());
    std::vector<std::vector<at::Tensor>> held;
    for (int call = 0; call < 12; ++call) {
      auto [outs, finished] = check_shared_sum(mesh.tp(), 100 * call);
      mesh.tp().all_reduce_(finished);  // the ranks' counts per row, summed
      EXPECT_TRUE(at::equal(finished, at::ones({250}))) << "call " << call;
      if (call % 3 == 0) held.push_back(outs);  // the others are freed at once
    }
    for (size_t i = 0; i < held.size(); ++i) {
      at::Tensor want = seeded(300 * i, {250, 10});
      for (int r = 1; r < world; ++r) want = want + seeded(300 * i + r, {250, 10});
      EXPECT_TRUE(at::equal(held[i][0], want)) << "held output " << i << " was overwritten";
    }
  }));
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    MeshOptions options = local(port);
    options.shared_memory_min_bytes = -1;
    const ProcessMesh mesh(rank, {.tp = world}, options);
    ASSERT_FALSE(mesh.tp().shared_memory());
    EXPECT_TRUE(at::equal(check_shared_sum(mesh.tp(), 7, /*exact=*/false).second, at::ones({250})));
  }));
}

// A rank that falls behind is not waited for while there are rows to finish: rank 1 produces
// the second round (rows 102-203) 150 ms late, and the others finish all of the first round's
// rows meanwhile; the results are the same bits.
TEST_P(CommOps, SharedSumsGoToTheRanksAhead) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, small_slots(port));
    ASSERT_TRUE(mesh.tp().shared_memory());
    check_shared_sum(mesh.tp(), 1);  // the pool's buffers made, every rank in step
    const auto late = [] { std::this_thread::sleep_for(std::chrono::milliseconds(150)); };
    const at::Tensor finished =
        check_shared_sum(mesh.tp(), 2, true, rank == 1 ? late : std::function<void()>(), 102)
            .second;
    if (rank == 1) {
      EXPECT_EQ(finished.narrow(0, 0, 102).sum().item<double>(), 0.0)
          << "the late rank finished rows of the first round";
    }
    at::Tensor all = finished.clone();
    mesh.tp().all_reduce_(all);
    EXPECT_TRUE(at::equal(all, at::ones({250})));
  }));
}

// The reduce-scatter's rounds hold whole batch entries where a slot can (1024 floats: 20 rows
// of 50, so two entries of 8 rows a round), so every rank sums the same number of rows in each
// round; the result is the sum's slice all the same.
TEST_P(CommOps, ReduceScatterRoundsHoldWholeBatchEntries) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, small_slots(port));
    ASSERT_TRUE(mesh.tp().shared_memory());
    const int64_t outer = 5, length = 8, cols = 50;
    std::vector<at::Tensor> terms;  // [outer, length, cols] per rank
    for (int r = 0; r < world; ++r) terms.push_back(seeded(40 + r, {outer, length, cols}));
    std::vector<int64_t> blocks;
    const at::Tensor mine = mesh.tp().reduce_scatter_produced(
        outer, length, cols, at::kFloat,
        [&](int64_t first, at::Tensor& block) {
          blocks.push_back(block.size(0));
          block.copy_(terms[rank].view({-1, cols}).narrow(0, first, block.size(0)));
        },
        {});
    EXPECT_EQ(blocks, (std::vector<int64_t>{16, 16, 8}));
    at::Tensor want = terms[0];
    for (int r = 1; r < world; ++r) want = want + terms[r];
    const int64_t local = length / world;
    EXPECT_TRUE(at::equal(mine, want.narrow(1, rank * local, local)));
  }));
}

// A rank that reaches a shared-memory collective late shows in the others' wait: rank 0
// arrives 150 ms before the rest and waits about that long; they wait next to nothing.
TEST_P(CommOps, SharedMemoryWaitCountsTheTimeBehindTheLastRank) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    const ProcessMesh mesh(rank, {.tp = world}, small_slots(port));
    ASSERT_TRUE(mesh.tp().shared_memory());
    at::Tensor x = at::ones({100});
    mesh.tp().all_reduce_(x);  // every rank connected and in step
    mesh.tp().reset_stats();
    EXPECT_EQ(mesh.tp().stats().shared_memory_wait_seconds, 0.0);
    if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(150));
    mesh.tp().all_reduce_(x);
    const double waited = mesh.tp().stats().shared_memory_wait_seconds;
    if (rank == 0) {
      EXPECT_GT(waited, 0.1);
      EXPECT_LT(waited, 5.0);
    } else {
      EXPECT_LT(waited, 0.1);
    }
    mesh.tp().reset_stats();
    EXPECT_EQ(mesh.tp().stats().shared_memory_wait_seconds, 0.0);
  }));
}

// The path of ranks that share a GPU (MeshOptions::host_staging), on its CPU stand-in: every
// tensor travels as a host copy over Gloo and the results come back into the caller's tensors,
// for each collective, the asynchronous ones included, and for the pipeline's sends.
TEST_P(CommOps, HostStagedCollectivesEqualTheirDefinitions) {
  const int world = GetParam();
  expect_all_ranks_passed(run_ranks(world, [&](int rank, int port) {
    MeshOptions options = local(port);
    options.host_staging = MeshOptions::HostStaging::kEveryTensor;
    const ProcessMesh mesh(rank, {.tp = world}, options);
    const ProcessGroup& tp = mesh.tp();
    ASSERT_FALSE(tp.shared_memory());
    std::vector<at::Tensor> mine;  // [4, 6] per rank
    for (int r = 0; r < world; ++r) mine.push_back(seeded(100 + r, {4 * world, 6}));
    const at::Tensor sum = at::stack(mine).sum(0);  // [4 * world, 6]

    at::Tensor t = mine[rank].clone();
    tp.all_reduce_(t);
    expect_allclose(t, sum, "all_reduce_");
    t = mine[rank].clone();
    tp.all_reduce_(t, ReduceOp::kMax);
    expect_allclose(t, std::get<0>(at::stack(mine).max(0)), "all_reduce_ max");
    t = mine[rank].clone();
    PendingWork pending = tp.all_reduce_async(t);
    pending.wait();
    expect_allclose(t, sum, "all_reduce_async");

    expect_allclose(tp.all_gather(mine[rank], 1), at::cat(mine, 1), "all_gather");
    at::Tensor gathered = at::zeros({4 * world * world, 6});
    gathered.narrow(0, rank * 4 * world, 4 * world).copy_(mine[rank]);
    tp.all_gather_in_place(gathered, 0);
    expect_allclose(gathered, at::cat(mine, 0), "all_gather_in_place");
    at::Tensor into = at::zeros({4 * world * world, 6});
    tp.all_gather_into_async(mine[rank], into).wait();
    expect_allclose(into, at::cat(mine, 0), "all_gather_into_async");

    const int64_t n = 4;
    expect_allclose(tp.reduce_scatter(mine[rank], 0), sum.narrow(0, rank * n, n), "reduce_scatter");
    at::Tensor scattered = at::zeros({n, 6});
    tp.reduce_scatter_async(mine[rank], scattered).wait();
    expect_allclose(scattered, sum.narrow(0, rank * n, n), "reduce_scatter_async");

    std::vector<at::Tensor> to_me;
    for (int r = 0; r < world; ++r) to_me.push_back(mine[r].narrow(0, rank * n, n));
    expect_allclose(tp.all_to_all(mine[rank]), at::cat(to_me, 0), "all_to_all");

    t = rank == 1 ? mine[1].clone() : at::zeros({4 * world, 6});
    tp.broadcast_(t, 1);
    expect_allclose(t, mine[1], "broadcast_");

    const at::Tensor produced = tp.sum_produced(
        4 * world, 6, at::kFloat,
        [&](int64_t first, at::Tensor& block) {
          block.copy_(mine[rank].narrow(0, first, block.size(0)));
        },
        at::Tensor());
    expect_allclose(produced, sum, "sum_produced");
    check_sequence_collectives(tp, 50, /*exact=*/false);

    const int next = (rank + 1) % world, previous = (rank + world - 1) % world;
    PendingWork sent = tp.isend(mine[rank], next, 7);
    at::Tensor received = at::zeros({4 * world, 6});
    tp.recv_(received, previous, 7);
    sent.wait();
    expect_allclose(received, mine[previous], "isend / recv_");
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommOps, ::testing::Values(2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

// A rank that throws (or is killed) before a collective: its peer's collective must fail with
// an Error naming the group, long before the collective timeout.
void expect_peer_failure_is_fast(bool kill_self, bool shared_memory = false) {
  const auto statuses = run_ranks(2, [&](int rank, int port) {
    MeshOptions options = local(port, std::chrono::seconds(60));
    options.shared_memory_min_bytes = shared_memory ? 0 : -1;
    const ProcessMesh mesh(rank, {.tp = 2}, options);
    ASSERT_EQ(mesh.tp().shared_memory(), shared_memory);
    mesh.world().barrier();  // both meshes are complete before rank 1 goes
    if (rank == 1) {
      if (kill_self) std::raise(SIGKILL);
      _exit(3);  // as a rank whose job threw would
    }
    const auto start = std::chrono::steady_clock::now();
    at::Tensor t = at::ones({4});
    try {
      mesh.tp().all_reduce_(t);
      ADD_FAILURE() << "all_reduce succeeded without its peer";
    } catch (const shardformer::Error& e) {
      EXPECT_NE(std::string(e.what()).find("group 'tp'"), std::string::npos) << e.what();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0) << "the collective took " << seconds << " s to notice";
  });
  EXPECT_TRUE(WIFEXITED(statuses[0]) && WEXITSTATUS(statuses[0]) == 0);
  if (kill_self) {
    EXPECT_TRUE(WIFSIGNALED(statuses[1]) && WTERMSIG(statuses[1]) == SIGKILL);
  } else {
    EXPECT_TRUE(WIFEXITED(statuses[1]) && WEXITSTATUS(statuses[1]) == 3);
  }
}

TEST(ProcessMeshFailure, PeerThatExitsFailsTheCollectiveFast) {
  expect_peer_failure_is_fast(false);
}
TEST(ProcessMeshFailure, PeerThatIsKilledFailsTheCollectiveFast) {
  expect_peer_failure_is_fast(true);
}
TEST(ProcessMeshFailure, PeerThatIsKilledFailsASharedMemoryCollectiveFast) {
  expect_peer_failure_is_fast(true, /*shared_memory=*/true);
}

TEST(ProcessMeshFailure, SharedMemoryNamesLeftByADeadRankAreRemovedByPid) {
  // No process has these pids (beyond Linux's pid_max of 2^22).
  const std::vector<std::string> left{"/shardformer-tp-0_1-7654321-00aa",
                                      "/shardformer-sp-2_3-7654321-00bb"};
  const std::vector<std::string> kept{"/shardformer-tp-0_1-76543210-00cc",  // another pid
                                      "/shardformer-tp-0_1-17654321-00dd",  // its tail matches
                                      "/other-tp-7654321-00ee"};            // not ours
  for (const auto& names : {left, kept}) {
    for (const std::string& name : names) {
      const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
      ASSERT_GE(fd, 0) << name;
      ::close(fd);
    }
  }
  EXPECT_EQ(remove_shared_memory_left_by(7654321), 2);
  for (const std::string& name : left) {
    EXPECT_FALSE(std::filesystem::exists("/dev/shm" + name)) << name;
  }
  for (const std::string& name : kept) {
    EXPECT_TRUE(std::filesystem::exists("/dev/shm" + name)) << name;
    ::shm_unlink(name.c_str());
  }
  EXPECT_EQ(remove_shared_memory_left_by(7654321), 0);
}
