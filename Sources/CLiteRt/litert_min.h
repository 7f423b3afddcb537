/* Veil's minimal declarations of the LiteRT C API, as exported by libLiteRt.so from the PyPI wheel
 * ai-edge-litert 2.3.0 (pinned in scripts/fixtures.lock). The wheel ships the library but no headers;
 * these mirror the public litert/c headers (Apache-2.0) for the few calls CPU inference needs.
 * Layouts mirrored here are checked at run time by VeilTracking's tests (outputs compared with the
 * models' known behaviour on real photos). */
#ifndef VEIL_LITERT_MIN_H
#define VEIL_LITERT_MIN_H

/* The runtime is unpacked from its wheel by scripts/bootstrap, which `make` runs; a plain
 * `swift build` in a fresh checkout would otherwise fail only at link time, with "cannot find -lLiteRt". */
#if defined(__has_include)
#if !__has_include("../../.cache/veil/lib/libLiteRt.so")
#error "LiteRT is not installed in this checkout yet: run `make` (or `scripts/bootstrap`) once, then `swift build` works. See README.md."
#endif
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

typedef struct LiteRtEnvironmentT *LiteRtEnvironment;
typedef struct LiteRtModelT *LiteRtModel;
typedef struct LiteRtSignatureT *LiteRtSignature;
typedef struct LiteRtTensorT *LiteRtTensor;
typedef struct LiteRtOptionsT *LiteRtOptions;
typedef struct LiteRtOpaqueOptionsT *LiteRtOpaqueOptions;
typedef struct LiteRtCompiledModelT *LiteRtCompiledModel;
typedef struct LiteRtTensorBufferT *LiteRtTensorBuffer;

typedef int LiteRtStatus;               /* 0 == ok */
typedef size_t LiteRtParamIndex;
typedef int LiteRtHwAcceleratorSet;     /* bit set; 1 == CPU */
typedef int LiteRtElementType;          /* values of TfLiteType; 1 == float32 */
typedef int LiteRtTensorBufferLockMode; /* 0 == read, 1 == write */

typedef struct {
  unsigned int rank : 7;
  unsigned int has_strides : 1;
  int32_t dimensions[8];
  uint32_t strides[8];
} LiteRtLayout;
_Static_assert(sizeof(LiteRtLayout) == 68, "LiteRtLayout mirrors litert/c/litert_layout.h");

typedef struct {
  LiteRtElementType element_type;
  LiteRtLayout layout;
} LiteRtRankedTensorType;
_Static_assert(sizeof(LiteRtRankedTensorType) == 72, "LiteRtRankedTensorType mirrors litert_model.h");

typedef struct LiteRtEnvOption LiteRtEnvOption;
typedef void (*LiteRtHostMemoryDeallocator)(void *addr);

LiteRtStatus LiteRtCreateEnvironment(int num_options, const LiteRtEnvOption *options, LiteRtEnvironment *environment);
void LiteRtDestroyEnvironment(LiteRtEnvironment environment);

LiteRtStatus LiteRtCreateModelFromFile(LiteRtEnvironment environment, const char *filename, LiteRtModel *model);
void LiteRtDestroyModel(LiteRtModel model);
LiteRtStatus LiteRtGetModelSignature(LiteRtModel model, LiteRtParamIndex signature_index, LiteRtSignature *signature);
LiteRtStatus LiteRtGetNumSignatureInputs(LiteRtSignature signature, LiteRtParamIndex *num_inputs);
LiteRtStatus LiteRtGetNumSignatureOutputs(LiteRtSignature signature, LiteRtParamIndex *num_outputs);
LiteRtStatus LiteRtGetSignatureInputName(LiteRtSignature signature, LiteRtParamIndex input_idx, const char **input_name);
LiteRtStatus LiteRtGetSignatureOutputName(LiteRtSignature signature, LiteRtParamIndex output_idx, const char **output_name);
LiteRtStatus LiteRtGetSignatureInputTensorByIndex(LiteRtSignature signature, LiteRtParamIndex input_idx, LiteRtTensor *tensor);
LiteRtStatus LiteRtGetSignatureOutputTensorByIndex(LiteRtSignature signature, LiteRtParamIndex output_idx, LiteRtTensor *tensor);
LiteRtStatus LiteRtGetRankedTensorType(LiteRtTensor tensor, LiteRtRankedTensorType *ranked_tensor_type);

LiteRtStatus LiteRtCreateOptions(LiteRtOptions *options);
void LiteRtDestroyOptions(LiteRtOptions options);
LiteRtStatus LiteRtSetOptionsHardwareAccelerators(LiteRtOptions options, LiteRtHwAcceleratorSet hardware_accelerators);
LiteRtStatus LiteRtCreateOpaqueOptions(const char *payload_identifier, void *payload_data,
                                       void (*payload_destructor)(void *payload_data), LiteRtOpaqueOptions *options);
LiteRtStatus LiteRtAddOpaqueOptions(LiteRtOptions options, LiteRtOpaqueOptions opaque_options);

LiteRtStatus LiteRtCreateCompiledModel(LiteRtEnvironment environment, LiteRtModel model,
                                       LiteRtOptions compilation_options, LiteRtCompiledModel *compiled_model);
void LiteRtDestroyCompiledModel(LiteRtCompiledModel compiled_model);
LiteRtStatus LiteRtRunCompiledModel(LiteRtCompiledModel compiled_model, LiteRtParamIndex signature_index,
                                    size_t num_input_buffers, LiteRtTensorBuffer *input_buffers,
                                    size_t num_output_buffers, LiteRtTensorBuffer *output_buffers);

LiteRtStatus LiteRtCreateTensorBufferFromHostMemory(const LiteRtRankedTensorType *tensor_type, void *host_buffer_addr,
                                                    size_t host_buffer_size, LiteRtHostMemoryDeallocator deallocator,
                                                    LiteRtTensorBuffer *buffer);
LiteRtStatus LiteRtLockTensorBuffer(LiteRtTensorBuffer tensor_buffer, void **host_mem_addr, LiteRtTensorBufferLockMode lock_mode);
LiteRtStatus LiteRtUnlockTensorBuffer(LiteRtTensorBuffer buffer);
void LiteRtDestroyTensorBuffer(LiteRtTensorBuffer buffer);
LiteRtStatus LiteRtGetTensorBufferTensorType(LiteRtTensorBuffer buffer, LiteRtRankedTensorType *tensor_type);

/* A model from bytes in memory, which must outlive the model (litert_model.h). */
LiteRtStatus LiteRtCreateModelFromBuffer(LiteRtEnvironment environment, const void *buffer_addr, size_t buffer_size,
                                         LiteRtModel *model);

/* A custom operation's kernel (litert_custom_op_kernel.h). The runtime calls Init once per node in
 * the model's operator order with the node's custom options (FlexBuffers bytes, or NULL), and
 * GetOutputLayouts once per node with its input layouts; the kernel fills the output layouts, which
 * arrive zeroed. Run gets one tensor buffer per input and output, made for that call only, and is
 * not told which node it runs. Destroy comes once per node. The runtime ignores every status these
 * return (LiteRT 2.3.0), so a kernel records its failures itself. */
typedef struct {
  LiteRtStatus (*Init)(void *user_data, const void *init_data, size_t init_data_size);
  LiteRtStatus (*GetOutputLayouts)(void *user_data, size_t num_inputs, const LiteRtLayout *input_layouts,
                                   size_t num_outputs, LiteRtLayout *output_layouts);
  LiteRtStatus (*Run)(void *user_data, size_t num_inputs, const LiteRtTensorBuffer *inputs,
                      size_t num_outputs, LiteRtTensorBuffer *outputs);
  LiteRtStatus (*Destroy)(void *user_data);
} LiteRtCustomOpKernel;

/* Registers a kernel for the custom operation `custom_op_name` with a compilation. LiteRT 2.3.0
 * registers it as version 1 whatever `custom_op_version` says (litert_options.h). */
LiteRtStatus LiteRtAddCustomOpKernelOption(LiteRtOptions options, const char *custom_op_name, int custom_op_version,
                                           const LiteRtCustomOpKernel *custom_op_kernel, void *custom_op_kernel_user_data);
#endif
