// Tokenizer throughput: encodes every line of a text file with a model folder's tokenizer.json
// (the SDK's Tokenizer, on this thread) for a few rounds and prints the first round's (a cold
// word cache) and the best round's tokens/s as JSON (bench/tokenizer_speed.py runs it beside HF
// tokenizers).
#include "shardformer/tokenizer/tokenizer.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: tokenizer_speed MODEL_DIR TEXT_FILE [ROUNDS]\n";
    return 2;
  }
  const auto tokenizer = shardformer::tokenizer::Tokenizer::from_file(argv[1]);
  std::ifstream in(argv[2]);
  std::vector<std::string> lines;
  size_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    bytes += line.size();
    lines.push_back(std::move(line));
  }
  const int rounds = argc > 3 ? std::stoi(argv[3]) : 5;
  double best = 1e30;
  double first = 0;
  size_t tokens = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    size_t count = 0;
    for (const std::string& line : lines) count += tokenizer.encode(line).size();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (round == 0) first = seconds;
    best = std::min(best, seconds);
    tokens = count;
  }
  std::cout << "{\"tokens\": " << tokens << ", \"bytes\": " << bytes << ", \"seconds\": " << best
            << ", \"tokens_per_s\": " << tokens / best
            << ", \"first_round_tokens_per_s\": " << tokens / first << "}\n";
  return 0;
}
