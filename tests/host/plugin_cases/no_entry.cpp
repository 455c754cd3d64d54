// A valid shared library without the plugin entry point.
extern "C" __attribute__((visibility("default"))) int not_a_shardformer_plugin(void) { return 1; }
