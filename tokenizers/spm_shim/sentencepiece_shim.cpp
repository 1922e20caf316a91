// The SentencePiece shim: libsentencepiece behind a C interface, loaded with RTLD_DEEPBIND.
#include "sentencepiece_shim.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

extern "C" {

void* conveyor_spm_load(const char* path, char* error, size_t error_size) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  auto status = sp->Load(path);
  if (!status.ok()) {
    std::snprintf(error, error_size, "%s", status.ToString().c_str());
    delete sp;
    return nullptr;
  }
  return sp;
}

void conveyor_spm_free(void* handle) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(handle);
}

int32_t conveyor_spm_vocab_size(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize();
}

int32_t conveyor_spm_encode(void* handle, const char* text, size_t length, int32_t* ids,
                            int32_t capacity) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  std::vector<int> out;
  if (!sp->Encode(std::string_view(text, length), &out).ok()) return -1;
  const int32_t n = static_cast<int32_t>(out.size());
  for (int32_t i = 0; i < n && i < capacity; ++i) ids[i] = out[i];
  return n;
}

int32_t conveyor_spm_piece(void* handle, int32_t id, char* out, int32_t capacity) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  if (id < 0 || id >= sp->GetPieceSize()) return -1;
  const std::string& piece = sp->IdToPiece(id);
  const int32_t n = static_cast<int32_t>(piece.size());
  std::memcpy(out, piece.data(), static_cast<size_t>(std::min(n, capacity)));
  return n;
}

int32_t conveyor_spm_piece_kind(void* handle, int32_t id) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  if (sp->IsByte(id)) return 1;
  if (sp->IsControl(id) || sp->IsUnknown(id)) return 2;
  return 0;
}

int32_t conveyor_spm_bos_id(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->bos_id();
}

int32_t conveyor_spm_eos_id(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->eos_id();
}
}
