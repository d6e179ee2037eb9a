// Note [Settings table]
// Every environment variable and setting torch_neuron reads is declared once, in the table in
// Settings.cpp: its name, type, default and one line of doc. Code reads them only through this
// header (C++) or torch_neuron._C._setting (Python); nothing else calls getenv or reads
// os.environ. torch_neuron.settings() and `python -m torch_neuron env` list the table, and
// docs/settings.md and the test fixtures are checked against it (test_settings.py).
//
// A setting's value comes, in this order, from a call of the API that sets it (source "api":
// torch_neuron.set_execute and the like), the environment (source "environment", read at each
// lookup, so a variable set before the feature that uses it first runs takes effect), or the
// table's default (source "default"). An empty variable counts as unset. A value that does not
// parse raises c10::Error (RuntimeError) naming the variable and the values it accepts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace torch_neuron {
namespace settings {

enum class Type {
  Bool,    // 1/0, true/false, yes/no, on/off (any case)
  Int,     // a decimal integer
  Choice,  // one of the listed words
  Text,    // free text, checked by the code that uses it (an instance name, a folder)
};

struct Spec {
  const char* name;
  Type type;
  const char* default_value;  // "" means unset (no value)
  const char* choices;        // Choice: the accepted words, separated by '|'
  const char* doc;
};

enum class Source { Default, Environment, Api };
const char* source_name(Source source);

struct Value {
  std::string text;  // normalized: "1"/"0" for booleans
  Source source;
};

// The table, in the order the docs list it.
const std::vector<Spec>& table();
// Throws c10::Error for a name that is not in the table.
const Spec& spec(std::string_view name);

// The current value of a setting (checked against its type).
Value read(std::string_view name);
bool read_bool(std::string_view name);
std::optional<int64_t> read_int(std::string_view name);  // nullopt when unset
std::string read_text(std::string_view name);             // Text and Choice settings

// Records a value set through the API (checked against its type); it wins over the
// environment from then on.
void set_from_api(std::string_view name, const std::string& text);

// "TORCH_NEURON_X='v' is not valid; ..." : the message of a value the reader rejects for a
// reason of its own (a core id out of range), so that every bad value reads alike.
std::string invalid_value(std::string_view name, const std::string& value,
                          const std::string& why);

}  // namespace settings
}  // namespace torch_neuron
