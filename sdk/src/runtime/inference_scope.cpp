// The thread-local flag behind InferenceScope (inference_scope.h).
#include "shardformer/runtime/inference_scope.h"

namespace shardformer::runtime {
namespace {

thread_local bool in_inference = false;

}  // namespace

InferenceScope::InferenceScope() : previous_(in_inference) { in_inference = true; }

InferenceScope::~InferenceScope() { in_inference = previous_; }

bool InferenceScope::active() { return in_inference; }

}  // namespace shardformer::runtime
