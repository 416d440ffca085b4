// A tuning run's saved state, split for incremental storage. The state (the strategy's JSON) has
// parts that grow with every trial, such as the model strategy's samples: writing the whole
// document at every commit costs O(trials) bytes per commit. The database stores instead the
// state's "record lists" (every array whose elements are all objects or arrays) as one row per
// element, keyed by the list's JSON pointer and the element's index, and the rest (the base, with
// those lists left empty) in tuning_runs.state_json. A commit writes the base and only the
// elements that changed: those after the longest prefix that equals what is stored.
//
// Pure JSON, no SQL: the rows are read and written by TuningDB.cpp.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::tuning_db::run_state {

// clang-tidy 14 flags the implicit, noexcept move constructor, whose members' moves
// (nlohmann::json, std::map) do not throw.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Split {
    nlohmann::json base; ///< the state with every record list replaced by []
    /// JSON pointer of each non-empty record list (e.g. "/strategy/samples") -> its elements,
    /// each as compact JSON text, in order.
    std::map<std::string, std::vector<std::string>> lists;
};

/// Splits a state. Record lists are not looked into (an element is stored whole); a record list
/// inside an object of another kind is found at any depth.
Split split(const nlohmann::json &state);

/// The inverse of split: the base with each list's elements put back at its pointer.
/// Raises nlohmann::json::exception when an element is not valid JSON.
nlohmann::json join(nlohmann::json base,
                    const std::map<std::string, std::vector<std::string>> &lists);

} // namespace kiln::tuning_db::run_state
