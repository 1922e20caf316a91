// Helpers shared by the executor suites: what each request gave over the steps of an
// executor_core, gathered from the step outputs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pipeline/executor_core.hpp"

namespace conveyor::test {

/// One request's text, token ids and result, over all the steps it ran in.
struct run_result {
  std::string text;
  std::vector<int32_t> tokens;
  request_result result;
};

/// Adds what `step` gave each request to `out`.
inline void collect(const pipeline::step_output& step, std::map<request_id, run_result>& out) {
  for (auto& c : step.chunks) {
    out[c.id].text += c.text;
    out[c.id].tokens.insert(out[c.id].tokens.end(), c.tokens.begin(), c.tokens.end());
  }
  for (auto& r : step.results) {
    out[r.id].result = r;
    out[r.id].text += r.tail;
  }
}

/// Steps `core` until it has no work (at most `max_steps`); what each request gave.
inline std::map<request_id, run_result> run_until_idle(pipeline::executor_core& core,
                                                       int max_steps = 10000) {
  std::map<request_id, run_result> out;
  for (int i = 0; i < max_steps && core.has_work(); ++i) collect(core.step(), out);
  return out;
}

}  // namespace conveyor::test
