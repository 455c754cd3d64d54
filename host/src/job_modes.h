// The modes of a job, one file each (job_forward.cpp, job_generate.cpp, job_embed.cpp,
// job_transcribe.cpp, job_classify.cpp, job_segment.cpp, job_caption.cpp, job_train.cpp): each runs
// on every rank of the job's session; `writer` is the one rank that writes the results to `out` and
// the output files.
#pragma once

#include "job_config.h"

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/runtime/session.h"
#include "shardformer/vision/image.h"
#include "shardformer/vision/image_processor.h"

#include <chrono>
#include <filesystem>
#include <ostream>

namespace shardformer::host {

struct JobInputs;  // jobs.h

void run_forward(const JobConfig& config, Session& session, bool writer, std::ostream& out);
void run_generate(const JobConfig& config, Session& session, bool writer, std::ostream& out);
void run_embed(const JobConfig& config, Session& session, bool writer, std::ostream& out);
void run_transcribe(const JobConfig& config, Session& session, bool writer, std::ostream& out);
// `read`: the inputs this process already read (classify.images decoded, with the seconds that
// took), or null to read them here.
void run_classify(const JobConfig& config, Session& session, bool writer, std::ostream& out,
                  const JobInputs* read);
// `read`: as for run_classify (segment.images).
void run_segment(const JobConfig& config, Session& session, bool writer, std::ostream& out,
                 const JobInputs* read);
// `read`: as for run_classify (caption.images). Rank 0 writes.
void run_caption(const JobConfig& config, Session& session, bool writer, std::ostream& out,
                 const JobInputs* read);
// An image classifier's number of classes (config.json's id2label, else num_labels, else 2 as HF
// defaults) and their names by class index ("LABEL_<i>" where id2label has none, as HF names them).
int64_t class_count(const HFConfig& config);
std::vector<std::string> class_labels(const HFConfig& config, int64_t classes);
// The job's images (job_images.cpp): classify.images, segment.images or caption.images decoded;
// throws ConfigError naming the key, the file and what is wrong.
std::vector<vision::Image> read_job_images(const JobConfig& config);
// The images `read` holds (decoded before the ranks started), else read_job_images' into
// `decoded`; *decode_seconds, when given: the time the decoding took.
const std::vector<vision::Image>& job_images(const JobConfig& config, const JobInputs* read,
                                             std::vector<vision::Image>& decoded,
                                             double* decode_seconds = nullptr);
// images[first, last) prepared by `processor`: [last - first, 3, height, width]; ConfigError
// naming the key, the index and the file for an image the processor refuses.
at::Tensor job_pixel_values(const JobConfig& config, const std::vector<vision::Image>& images,
                            size_t first, size_t last,
                            const vision::ImageProcessorOptions& processor);
// Training on this `rank` (rank 0 writes); `resume`: the save to continue from (the session
// was built from it), or empty.
void run_train(const JobConfig& config, Session& session, const std::filesystem::path& resume,
               int rank, std::ostream& out);
// The save a train job continues from (checkpoint.resume), or empty to start from model.path.
std::filesystem::path train_resume_checkpoint(const JobConfig& config);

// Checks of a job's inputs and outputs before it runs (job_inputs.cpp); each throws ConfigError
// naming the config file and `key`. Every id of `sequences` must lie in [0, vocab_size).
void check_token_ids(const JobConfig& config, const std::vector<std::vector<int64_t>>& sequences,
                     const std::string& key, int64_t vocab_size);
// The index of the longest of `sequences` (not empty).
size_t longest_sequence(const std::vector<std::vector<int64_t>>& sequences);
// `output`'s folder must exist and be writable.
void check_output_path(const JobConfig& config, const std::filesystem::path& output,
                       const std::string& key);

// Test hook: SHARDFORMER_TEST_FAIL_RANK=N makes rank N fail as SHARDFORMER_TEST_FAIL_MODE says
// (runtime::fail_now: throw, kill, hang, stop) once its model is built (`step` -1), or after
// training step SHARDFORMER_TEST_FAIL_STEP when that is set; unless SHARDFORMER_TEST_FAIL_AT
// picks an operation instead (runtime/activity.h).
void inject_test_failure(int64_t step);

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace shardformer::host
