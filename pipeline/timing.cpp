// Names of the timing enums.
#include "pipeline/timing.hpp"

namespace conveyor::pipeline {

const char* to_string(outcome x) {
  switch (x) {
    case outcome::finished:
      return "finished";
    case outcome::cancelled:
      return "cancelled";
    case outcome::expired:
      return "expired";
    case outcome::rejected:
      return "rejected";
    case outcome::failed:
      return "failed";
  }
  return "unknown";
}

const char* to_string(finish_reason x) {
  switch (x) {
    case finish_reason::none:
      return "none";
    case finish_reason::stop:
      return "stop";
    case finish_reason::length:
      return "length";
  }
  return "unknown";
}

const char* to_string(step_kind x) {
  switch (x) {
    case step_kind::prefill:
      return "prefill";
    case step_kind::decode:
      return "decode";
  }
  return "unknown";
}

}  // namespace conveyor::pipeline
