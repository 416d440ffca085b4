#include "tuning_db/RunState.h"

namespace kiln::tuning_db::run_state {

namespace {

using json = nlohmann::json;

bool is_record_list(const json &j) {
    if (!j.is_array() || j.empty()) return false;
    for (const json &e : j) {
        if (!e.is_object() && !e.is_array()) return false;
    }
    return true;
}

/// A JSON pointer's reference token: '~' as "~0" and '/' as "~1".
std::string escape_token(const std::string &key) {
    std::string out;
    for (char c : key) {
        if (c == '~')
            out += "~0";
        else if (c == '/')
            out += "~1";
        else
            out += c;
    }
    return out;
}

void split_into(json &j, const std::string &pointer, Split &out) {
    if (is_record_list(j)) {
        std::vector<std::string> &items = out.lists[pointer];
        for (const json &e : j)
            items.push_back(e.dump());
        j = json::array();
        return;
    }
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it)
            split_into(it.value(), pointer + "/" + escape_token(it.key()), out);
    } else if (j.is_array()) {
        for (size_t i = 0; i < j.size(); i++)
            split_into(j[i], pointer + "/" + std::to_string(i), out);
    }
}

} // namespace

Split split(const json &state) {
    Split out;
    out.base = state;
    if (is_record_list(out.base)) {
        // The whole state is one list: keep it inline (a base must stay a document of its own).
        return out;
    }
    split_into(out.base, "", out);
    return out;
}

json join(json base, const std::map<std::string, std::vector<std::string>> &lists) {
    for (const auto &[pointer, items] : lists) {
        json list = json::array();
        for (const std::string &text : items)
            list.push_back(json::parse(text));
        base[json::json_pointer(pointer)] = std::move(list);
    }
    return base;
}

} // namespace kiln::tuning_db::run_state
