// The C interface of the SentencePiece shim library (see tokenizers/CMakeLists.txt for why it exists).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

/// Loads a .model file; returns a handle or null with a message in `error` (size `error_size`).
void* conveyor_spm_load(const char* path, char* error, size_t error_size);

/// Frees a handle.
void conveyor_spm_free(void* handle);

/// Number of pieces.
int32_t conveyor_spm_vocab_size(void* handle);

/// Encodes `text` into at most `capacity` ids; returns the number of ids the text needs (call
/// again with a larger buffer when it exceeds `capacity`), or -1 on error.
int32_t conveyor_spm_encode(void* handle, const char* text, size_t length, int32_t* ids,
                            int32_t capacity);

/// Copies piece `id` (as stored, "▁" included) into `out`; returns its length or -1.
int32_t conveyor_spm_piece(void* handle, int32_t id, char* out, int32_t capacity);

/// 1 for a byte-fallback piece (<0xAB>), 2 for a control or unknown piece, 0 otherwise.
int32_t conveyor_spm_piece_kind(void* handle, int32_t id);

/// Ids of BOS and EOS (-1 when absent).
int32_t conveyor_spm_bos_id(void* handle);
int32_t conveyor_spm_eos_id(void* handle);
}
