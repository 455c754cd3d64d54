// A stand-in for libFuzzer's main() (the fuzz_<target>_short tests of the gcc build): runs a fuzz
// target on every corpus file, then on deterministic random mutations of them (byte flips,
// truncations, insertions, number and length-field tweaks), for a bounded count and time.

// Usage: fuzz_<target>_short [-runs=N] [-max_total_time=SECONDS] [-seed=N] [-dict=FILE]
//                            [-artifact_prefix=PATH] CORPUS_DIR_OR_FILE...
// An exception other than the target's expected errors, or a crash, fails the run; the input is
// written to <artifact_prefix>crash-<hash> so that the libFuzzer build can replay it.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

constexpr size_t kMaxInputBytes = 1 << 16;

struct Options {
  uint64_t runs = 5000;  // mutated inputs after the corpus
  double max_total_time = 10.0;
  uint64_t seed = 1;
  std::string dict;
  std::string artifact_prefix = "./";
  std::vector<std::string> inputs;
};

// xorshift64*: the same sequence of mutations on every machine for a given seed.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  // Uniform in [0, n); n > 0.
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  bool one_in(size_t n) { return below(n) == 0; }

 private:
  uint64_t state_;
};

// ---- The input being run, for the crash handler --------------------------------------------

const uint8_t* g_current = nullptr;
size_t g_current_size = 0;
std::string g_crash_path;  // prepared before any input runs: the handler only calls open/write

uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
  return hash;
}

std::string save_artifact(const std::string& prefix, const uint8_t* data, size_t size) {
  char name[32];
  std::snprintf(name, sizeof(name), "crash-%016llx",
                static_cast<unsigned long long>(fnv1a(data, size)));
  const std::string path = prefix + name;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), size);
  return path;
}

extern "C" void on_fatal_signal(int signal) {
  static const char kMessage[] = "fuzz driver: fatal signal; the input is saved as ";
  const int fd = ::open(g_crash_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (g_current_size > 0) (void)!::write(fd, g_current, g_current_size);
    ::close(fd);
  }
  (void)!::write(2, kMessage, sizeof(kMessage) - 1);
  (void)!::write(2, g_crash_path.c_str(), g_crash_path.size());
  (void)!::write(2, "\n", 1);
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void install_crash_handler() {
  for (int signal : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) ::signal(signal, on_fatal_signal);
}

// Runs the target on one input; an escaping exception saves the input and ends the run.
void run_one(const Options& options, const Bytes& input) {
  g_current = input.data();
  g_current_size = input.size();
  try {
    LLVMFuzzerTestOneInput(input.data(), input.size());
  } catch (const std::exception& e) {
    const std::string path = save_artifact(options.artifact_prefix, input.data(), input.size());
    std::fprintf(stderr, "fuzz driver: uncaught %s: %s\nfuzz driver: the input is saved as %s\n",
                 typeid(e).name(), e.what(), path.c_str());
    std::exit(1);
  } catch (...) {
    const std::string path = save_artifact(options.artifact_prefix, input.data(), input.size());
    std::fprintf(stderr, "fuzz driver: uncaught non-std exception\nfuzz driver: saved as %s\n",
                 path.c_str());
    std::exit(1);
  }
  g_current = nullptr;
  g_current_size = 0;
}

// ---- Inputs ---------------------------------------------------------------------------------

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() > kMaxInputBytes) bytes.resize(kMaxInputBytes);
  return bytes;
}

// Every file of the given folders (sorted, so runs are reproducible) and the given files.
std::vector<Bytes> read_corpus(const std::vector<std::string>& inputs) {
  std::vector<Bytes> corpus;
  for (const std::string& input : inputs) {
    if (fs::is_directory(input)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(input)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& file : files) corpus.push_back(read_file(file));
    } else if (fs::is_regular_file(input)) {
      corpus.push_back(read_file(input));
    } else {
      std::fprintf(stderr, "fuzz driver: no such corpus file or folder: %s\n", input.c_str());
      std::exit(2);
    }
  }
  return corpus;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A libFuzzer dictionary: one quoted token a line (optionally name="token"), with \\, \" and
// \xNN escapes; '#' lines are comments.
std::vector<Bytes> read_dictionary(const std::string& path) {
  std::vector<Bytes> tokens;
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "fuzz driver: cannot read the dictionary %s\n", path.c_str());
    std::exit(2);
  }
  std::string line;
  while (std::getline(in, line)) {
    const size_t open = line.find('"');
    const size_t close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
    Bytes token;
    for (size_t i = open + 1; i < close; ++i) {
      if (line[i] == '\\' && i + 1 < close && line[i + 1] == 'x' && i + 3 < close &&
          hex_digit(line[i + 2]) >= 0 && hex_digit(line[i + 3]) >= 0) {
        token.push_back(static_cast<uint8_t>(hex_digit(line[i + 2]) * 16 + hex_digit(line[i + 3])));
        i += 3;
      } else if (line[i] == '\\' && i + 1 < close) {
        token.push_back(static_cast<uint8_t>(line[++i]));
      } else {
        token.push_back(static_cast<uint8_t>(line[i]));
      }
    }
    if (!token.empty()) tokens.push_back(std::move(token));
  }
  return tokens;
}

// ---- Mutations --------------------------------------------------------------------------------

// Numbers that sit on the edges parsers get wrong: signs, 32/64-bit limits, huge exponents.
constexpr std::array<std::string_view, 16> kInterestingNumbers{
    "0",
    "-1",
    "1",
    "255",
    "65536",
    "2147483648",
    "4294967296",
    "104857601",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "1e999",
    "-0.0",
};

// The same edges as 64-bit little-endian values, for binary length fields (the safetensors
// header length); size-relative ones are added at use.
constexpr std::array<uint64_t, 9> kInterestingU64{
    0,
    1,
    7,
    0x7fffffffull,
    0xffffffffull,
    100ull * 1024 * 1024 + 1,
    0x7fffffffffffffffull,
    0x8000000000000000ull,
    0xffffffffffffffffull,
};

// Bytes that mean something to JSON, TOML or a length field. Sized by the array: a string_view
// made from the literal would end at its leading NUL.
constexpr char kInterestingBytesArray[] = "\0\xff\x7f\x80\"{}[],:=-.0\n\\#'e";
constexpr std::string_view kInterestingBytes(kInterestingBytesArray,
                                             sizeof(kInterestingBytesArray) - 1);

class Mutator {
 public:
  Mutator(uint64_t seed, const std::vector<Bytes>& corpus, std::vector<Bytes> dictionary)
      : random_(seed), corpus_(corpus), dictionary_(std::move(dictionary)) {}

  // One to four mutations of `input`.
  void mutate(Bytes& input) {
    const size_t count = 1 + random_.below(4);
    for (size_t i = 0; i < count; ++i) mutate_once(input);
    if (input.size() > kMaxInputBytes) input.resize(kMaxInputBytes);
  }

 private:
  size_t position(const Bytes& input) { return random_.below(input.size() + 1); }

  void insert(Bytes& input, size_t at, const uint8_t* bytes, size_t size) {
    input.insert(input.begin() + static_cast<std::ptrdiff_t>(at), bytes, bytes + size);
  }

  void mutate_once(Bytes& input) {
    switch (random_.below(12)) {
      case 0:  // flip a bit
        if (!input.empty()) input[random_.below(input.size())] ^= uint8_t(1u << random_.below(8));
        break;
      case 1:  // a random byte
        if (!input.empty()) input[random_.below(input.size())] = uint8_t(random_.next());
        break;
      case 2:  // a byte that means something to JSON or TOML
        if (!input.empty()) {
          input[random_.below(input.size())] =
              uint8_t(kInterestingBytes[random_.below(kInterestingBytes.size())]);
        }
        break;
      case 3:  // truncate
        input.resize(random_.below(input.size() + 1));
        break;
      case 4: {  // insert random bytes
        uint8_t bytes[8];
        const size_t size = 1 + random_.below(sizeof(bytes));
        for (size_t i = 0; i < size; ++i) bytes[i] = uint8_t(random_.next());
        insert(input, position(input), bytes, size);
        break;
      }
      case 5:  // erase a range
        if (!input.empty()) {
          const size_t begin = random_.below(input.size());
          const size_t size = 1 + random_.below(std::min<size_t>(input.size() - begin, 64));
          input.erase(input.begin() + std::ptrdiff_t(begin),
                      input.begin() + std::ptrdiff_t(begin + size));
        }
        break;
      case 6:  // duplicate a range (repeated keys, entries, sections)
        if (!input.empty()) {
          const size_t begin = random_.below(input.size());
          const size_t size = 1 + random_.below(std::min<size_t>(input.size() - begin, 256));
          const Bytes copy(input.begin() + std::ptrdiff_t(begin),
                           input.begin() + std::ptrdiff_t(begin + size));
          insert(input, position(input), copy.data(), copy.size());
        }
        break;
      case 7:
      case 8: replace_number(input); break;
      case 9: tweak_length_field(input); break;
      case 10:  // a dictionary token
        if (!dictionary_.empty()) {
          const Bytes& token = dictionary_[random_.below(dictionary_.size())];
          insert(input, position(input), token.data(), token.size());
        }
        break;
      default: {  // splice: this input's head and another corpus input's tail
        const Bytes& other = corpus_[random_.below(corpus_.size())];
        input.resize(random_.below(input.size() + 1));
        const size_t from = random_.below(other.size() + 1);
        input.insert(input.end(), other.begin() + std::ptrdiff_t(from), other.end());
        break;
      }
    }
  }

  // Replaces a run of decimal digits (a shape, an offset, a size, a count) with an edge value.
  void replace_number(Bytes& input) {
    auto is_digit = [](uint8_t c) { return c >= '0' && c <= '9'; };
    std::vector<size_t> starts;
    for (size_t i = 0; i < input.size(); ++i) {
      if (is_digit(input[i]) && (i == 0 || !is_digit(input[i - 1]))) starts.push_back(i);
    }
    if (starts.empty()) return;
    const size_t begin = starts[random_.below(starts.size())];
    size_t end = begin;
    while (end < input.size() && is_digit(input[end])) ++end;
    const std::string_view number = kInterestingNumbers[random_.below(kInterestingNumbers.size())];
    input.erase(input.begin() + std::ptrdiff_t(begin), input.begin() + std::ptrdiff_t(end));
    insert(input, begin, reinterpret_cast<const uint8_t*>(number.data()), number.size());
  }

  // Overwrites the leading 8-byte little-endian length (the safetensors header length), or 8
  // bytes elsewhere, with an edge value or one near the input's size.
  void tweak_length_field(Bytes& input) {
    if (input.size() < 8) return;
    const uint64_t size = input.size();
    const std::array<uint64_t, 5> relative{size - 8, size - 7, size, size - 9, (size - 8) / 2};
    const uint64_t value = random_.one_in(2)
                               ? relative[random_.below(relative.size())]
                               : kInterestingU64[random_.below(kInterestingU64.size())];
    const size_t at = random_.one_in(4) ? random_.below(input.size() - 7) : 0;
    for (int i = 0; i < 8; ++i) input[at + i] = uint8_t(value >> (8 * i));
  }

  Random random_;
  const std::vector<Bytes>& corpus_;
  std::vector<Bytes> dictionary_;
};

// ---- Command line ---------------------------------------------------------------------------

bool take(std::string_view arg, std::string_view flag, std::string& value) {
  if (arg.substr(0, flag.size()) != flag) return false;
  value = std::string(arg.substr(flag.size()));
  return true;
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::string value;
    try {
      if (take(arg, "-runs=", value)) {
        options.runs = std::stoull(value);
      } else if (take(arg, "-max_total_time=", value)) {
        options.max_total_time = std::stod(value);
      } else if (take(arg, "-seed=", value)) {
        options.seed = std::stoull(value);
      } else if (take(arg, "-dict=", value)) {
        options.dict = value;
      } else if (take(arg, "-artifact_prefix=", value)) {
        options.artifact_prefix = value;
      } else if (!arg.empty() && arg[0] == '-') {
        std::fprintf(stderr, "fuzz driver: unknown option %s\n", argv[i]);
        std::exit(2);
      } else {
        options.inputs.emplace_back(arg);
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "fuzz driver: bad value in %s\n", argv[i]);
      std::exit(2);
    }
  }
  if (options.inputs.empty()) {
    std::fprintf(stderr,
                 "usage: %s [-runs=N] [-max_total_time=SECONDS] [-seed=N] [-dict=FILE] "
                 "[-artifact_prefix=PATH] CORPUS_DIR_OR_FILE...\n",
                 argv[0]);
    std::exit(2);
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  const std::vector<Bytes> corpus = read_corpus(options.inputs);
  if (corpus.empty()) {
    std::fprintf(stderr, "fuzz driver: the corpus is empty\n");
    return 2;
  }
  g_crash_path = options.artifact_prefix + "crash-current";
  install_crash_handler();

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  for (const Bytes& input : corpus) run_one(options, input);
  std::printf("fuzz driver: %zu corpus inputs passed in %.2f s\n", corpus.size(), elapsed());

  Mutator mutator(options.seed, corpus,
                  options.dict.empty() ? std::vector<Bytes>{} : read_dictionary(options.dict));
  Random pick(options.seed ^ 0x5bd1e995u);
  Bytes input;
  uint64_t runs = 0;
  for (; runs < options.runs; ++runs) {
    if ((runs & 63) == 0 && elapsed() > options.max_total_time) {
      std::printf("fuzz driver: stopped at the time limit of %.1f s\n", options.max_total_time);
      break;
    }
    // Mostly a fresh copy of a corpus input; sometimes the last mutant again, to go deeper.
    if (runs == 0 || !pick.one_in(4)) input = corpus[pick.below(corpus.size())];
    mutator.mutate(input);
    run_one(options, input);
  }
  const double seconds = elapsed();
  std::printf(
      "fuzz driver: %llu mutated inputs passed (seed %llu), %llu runs in %.2f s, %.0f exec/s\n",
      static_cast<unsigned long long>(runs), static_cast<unsigned long long>(options.seed),
      static_cast<unsigned long long>(runs + corpus.size()), seconds,
      double(runs + corpus.size()) / std::max(seconds, 1e-9));
  return 0;
}
