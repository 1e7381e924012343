// `flink-gpu completion bash|zsh` (see CompletionCommand.h): the two scripts, written from the
// CompletionModel. Every word a script offers is one of the model's; the scripts' own logic is
// the same for every subcommand, so that a new option needs no change here.
#include "commands/CompletionCommand.h"

#include <algorithm>
#include <iostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ExitCode.h"

namespace flink::cli {
namespace {

/// Words joined by spaces.
std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "" : " ") + word;
  return text;
}

/// The first clause of a description, for a shell's one-line menus: up to the first ". " (not of
/// "e.g. ", "i.e. " or "...") or "; ", and before a parenthesis that the cut leaves open; at most
/// 80 characters (cut at a space, with "...").
std::string shortDescription(std::string_view text) {
  std::size_t end = text.find("; ");
  for (std::size_t dot = text.find(". "); dot != std::string_view::npos && dot < end;
       dot = text.find(". ", dot + 1)) {
    const std::string_view before = text.substr(0, dot);
    // "MIG-... UUIDs" and "e.g. 2" end no sentence.
    const bool abbreviation = before.size() >= 3 && (before.substr(before.size() - 3) == "e.g" ||
                                                     before.substr(before.size() - 3) == "i.e");
    if (!abbreviation && !before.empty() && before.back() != '.') {
      end = dot;
      break;
    }
  }
  text = text.substr(0, end);
  if (!text.empty() && text.back() == '.') text.remove_suffix(1);
  std::size_t depth = 0;
  std::size_t open = std::string_view::npos;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(' && depth++ == 0) open = i;
    if (text[i] == ')' && depth > 0) --depth;
  }
  if (depth > 0) text = text.substr(0, open);
  while (!text.empty() && (text.back() == ' ' || text.back() == ',')) text.remove_suffix(1);
  constexpr std::size_t kLimit = 80;
  if (text.size() <= kLimit) return std::string(text);
  const std::size_t space = text.rfind(' ', kLimit - 3);
  return std::string(text.substr(0, space == std::string_view::npos ? kLimit - 3 : space)) + "...";
}

/// The options of `subcommand` and the global ones that follow a subcommand too, each name once.
std::vector<const CompletionOption*> optionsAfter(const CompletionModel& model,
                                                  const CompletionSubcommand& subcommand) {
  std::vector<const CompletionOption*> options;
  std::set<std::string> seen;
  for (const auto* list : {&subcommand.options, &model.globalOptions}) {
    for (const CompletionOption& option : *list) {
      bool fresh = false;
      for (const std::string& name : option.names) fresh = seen.insert(name).second || fresh;
      if (fresh) options.push_back(&option);
    }
  }
  return options;
}

std::vector<std::string> namesOf(const std::vector<const CompletionOption*>& options) {
  std::vector<std::string> names;
  for (const CompletionOption* option : options) {
    names.insert(names.end(), option->names.begin(), option->names.end());
  }
  return names;
}

// ---- bash -----------------------------------------------------------------------------------

/// "discover:-n|discover:--amount" for a bash `case` on "$command:$word".
std::string bashPattern(const std::string& subcommand, const CompletionOption& option) {
  std::string pattern;
  for (const std::string& name : option.names) {
    pattern += (pattern.empty() ? "" : "|") + subcommand + ":" + name;
  }
  return pattern;
}

/// The bash statements that complete the value of `option` (in $cur).
std::string bashValue(const CompletionOption& option, const std::string& alsoWords) {
  switch (option.value) {
    case ValueKind::kChoice:
      return "_flink_gpu_words \"" + joined(option.choices) + "\"";
    case ValueKind::kFile:
      return "_flink_gpu_paths";
    case ValueKind::kDirectory:
      // An optional folder: the options are as good a next word.
      return option.valueOptional
                 ? "_flink_gpu_paths -d; _flink_gpu_add_words \"" + alsoWords + "\""
                 : "_flink_gpu_paths -d";
    case ValueKind::kNone:
    case ValueKind::kCommandLine:
    case ValueKind::kOther:
      break;
  }
  return "COMPREPLY=()";
}

}  // namespace

std::string bashCompletion(const CompletionModel& model) {
  std::vector<std::string> commandNames;
  for (const CompletionSubcommand& subcommand : model.subcommands) {
    commandNames.push_back(subcommand.name);
  }
  std::vector<std::string> globalNames;
  for (const CompletionOption& option : model.globalOptions) {
    globalNames.insert(globalNames.end(), option.names.begin(), option.names.end());
  }

  // The `case` branches the script is made of, each for "$command:<word>" or "$command".
  // takesValue: options that take their value from the next word (an optional value, as of
  // `--config [DIR]`, is not taken from it when counting positionals: it need not be there).
  // values: what to offer after such an option. positionals: what to offer for positional N.
  // commandLines: which positional starts a command line (exec's command), which takes every
  // word after it. optionsOf: the options that may follow a subcommand.
  std::string takesValue;
  std::string values;
  std::string positionals;
  std::string commandLines;
  std::string optionsOf;
  for (const CompletionSubcommand& subcommand : model.subcommands) {
    const std::vector<const CompletionOption*> options = optionsAfter(model, subcommand);
    const std::string optionWords = joined(namesOf(options));
    optionsOf += "        " + subcommand.name + ") words=\"" + optionWords + "\" ;;\n";
    for (const CompletionOption* option : options) {
      if (option->value == ValueKind::kNone || option->names.empty()) continue;
      const std::string pattern = bashPattern(subcommand.name, *option);
      if (!option->valueOptional) takesValue += "        " + pattern + ") return 0 ;;\n";
      values += "            " + pattern + ")\n                " + bashValue(*option, optionWords) +
                "\n                return ;;\n";
    }
    for (std::size_t i = 0; i < subcommand.positionals.size(); ++i) {
      const CompletionOption& positional = subcommand.positionals[i];
      const std::string pattern = subcommand.name + ":" + std::to_string(i);
      if (positional.value == ValueKind::kCommandLine) {
        commandLines += "        " + subcommand.name + ") line=" + std::to_string(i) + " ;;\n";
        positionals += "            " + pattern +
                       ")\n                _flink_gpu_command_line \"$COMP_CWORD\"\n"
                       "                return ;;\n";
        break;
      }
      positionals += "            " + pattern + ")\n                " + bashValue(positional, "") +
                     "\n                return ;;\n";
    }
  }

  return R"(# bash completion for flink-gpu                               -*- shell-script -*-
# Made by `flink-gpu completion bash` from the command line flink-gpu itself parses: remake it
# rather than edit it. Installed as /usr/share/bash-completion/completions/flink-gpu, or sourced.

# COMPREPLY: the words of $1 that start with $cur.
_flink_gpu_words() {
    mapfile -t COMPREPLY < <(compgen -W "$1" -- "$cur")
}

_flink_gpu_add_words() {
    local more
    mapfile -t more < <(compgen -W "$1" -- "$cur")
    COMPREPLY+=("${more[@]}")
}

# Files, or folders with -d: bash-completion's _filedir where it is loaded.
_flink_gpu_paths() {
    if declare -F _filedir >/dev/null; then
        _filedir "$@"
        return
    fi
    compopt -o filenames 2>/dev/null
    if [[ ${1-} == -d ]]; then
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
    else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
}

# exec's command: the words from index $1 on are a command line of their own.
_flink_gpu_command_line() {
    if declare -F _command_offset >/dev/null; then
        _command_offset "$1"
    elif (( COMP_CWORD == $1 )); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
        _flink_gpu_paths
    fi
}

# Whether option $2 of subcommand $1 takes the next word as its value.
_flink_gpu_takes_value() {
    case $1:$2 in
)" + takesValue +
         R"(    esac
    return 1
}

_flink_gpu() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=
    (( COMP_CWORD > 0 )) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    # --format=json: bash breaks words at '=' (COMP_WORDBREAKS); the value is completed alone.
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]] && (( COMP_CWORD > 1 )); then
        prev=${COMP_WORDS[COMP_CWORD - 2]}
    fi

    # The subcommand is the first word that is not an option (the global options take no
    # value); after it, the positional arguments are the words that are neither options nor
    # their values, and every word after `--`. starts[N]: where positional N is.
    local command= word i
    local -i index=0 dashes=0
    local -a starts=()
    for (( i = 1; i < COMP_CWORD; i++ )); do
        word=${COMP_WORDS[i]}
        if [[ -z $command ]]; then
            [[ $word == -* ]] || command=$word
            continue
        fi
        if (( !dashes )); then
            case $word in
                --) dashes=1; continue ;;
                =) (( i++ )); continue ;;
                -*)
                    if [[ ${COMP_WORDS[i + 1]-} != = ]] && _flink_gpu_takes_value "$command" "$word"; then
                        (( i++ ))
                    fi
                    continue ;;
            esac
        fi
        starts[index]=$i
        (( index++ ))
    done

    if [[ -z $command ]]; then
        if [[ $cur == -* ]]; then
            _flink_gpu_words ")" +
         joined(globalNames) + R"("
        else
            _flink_gpu_words ")" +
         joined(commandNames) + R"("
        fi
        return
    fi

    # Inside a command line begun before this word (exec's command): every word is the command's.
    local -i line=-1
    case $command in
)" + commandLines +
         R"(    esac
    if (( line >= 0 && index > line )); then
        _flink_gpu_command_line "${starts[line]}"
        return
    fi
    if (( !dashes )); then
        # The value of the option before it.
        case $command:$prev in
)" + values +
         R"(        esac
    fi
    if (( dashes )) || [[ $cur != -* ]]; then
        case $command:$index in
)" + positionals +
         R"(        esac
    fi
    local words=
    case $command in
)" + optionsOf +
         R"(        *) return ;;
    esac
    if (( !dashes )); then
        _flink_gpu_words "$words"
    fi
}

complete -F _flink_gpu flink-gpu
)";
}

// ---- zsh ------------------------------------------------------------------------------------

namespace {

/// `text` inside a single-quoted zsh word.
std::string zshQuoted(std::string_view text) {
  std::string quoted;
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted;
}

/// `text` as an _arguments explanation or message: its brackets and colons escaped.
std::string zshEscaped(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

/// ":MESSAGE:ACTION" (or "::…" for an optional value) of a value.
std::string zshValue(const CompletionOption& option) {
  std::string message = option.valueName;
  message.erase(std::remove(message.begin(), message.end(), '['), message.end());
  message.erase(std::remove(message.begin(), message.end(), ']'), message.end());
  // CLI11's "TEXT" of a choice says less than the option's own name: "format".
  if (message == "TEXT" && !option.names.empty()) message = option.names.back().substr(2);
  if (message.empty()) message = "value";
  std::string action = " ";
  switch (option.value) {
    case ValueKind::kChoice:
      action = "(" + joined(option.choices) + ")";
      break;
    case ValueKind::kFile:
      action = "_files";
      break;
    case ValueKind::kDirectory:
      action = "_files -/";
      break;
    case ValueKind::kCommandLine:
      action = "_normal";
      break;
    case ValueKind::kNone:
    case ValueKind::kOther:
      break;
  }
  return std::string(option.valueOptional ? "::" : ":") + zshEscaped(message) + ":" + action;
}

/// The _arguments specs of `option`, one line each, ready for a zsh array.
std::string zshOption(const CompletionOption& option) {
  const std::string explanation = "[" + zshEscaped(shortDescription(option.description)) + "]";
  const bool repeatable =
      std::find(option.names.begin(), option.names.end(), "--verbose") != option.names.end();
  std::string exclusion;
  if (repeatable) {
    exclusion = "'*'";
  } else if (option.names.size() > 1) {
    exclusion = "'(" + joined(option.names) + ")'";
  }
  std::string names;
  for (const std::string& name : option.names) {
    // A value in the same word or the next: -n2 or -n 2, --amount=2 or --amount 2.
    std::string spelled = name;
    if (option.value != ValueKind::kNone) {
      spelled += name.rfind("--", 0) == 0 ? (option.valueOptional ? "=-" : "=") : "+";
    }
    names += (names.empty() ? "" : ",") + spelled;
  }
  if (option.names.size() > 1) names = "{" + names + "}";
  const std::string value = option.value == ValueKind::kNone ? "" : zshValue(option);
  return "        " + exclusion + names + "'" + zshQuoted(explanation + value) + "'\n";
}

}  // namespace

std::string zshCompletion(const CompletionModel& model) {
  std::string globals;
  for (const CompletionOption& option : model.globalOptions) globals += zshOption(option);
  std::string commands;
  std::string cases;
  for (const CompletionSubcommand& subcommand : model.subcommands) {
    commands += "        '" +
                zshQuoted(subcommand.name + ":" + shortDescription(subcommand.description)) + "'\n";
    // Its options and the global ones, each once (-h is both).
    std::string specs;
    for (const CompletionOption* option : optionsAfter(model, subcommand)) {
      specs += zshOption(*option);
    }
    for (std::size_t i = 0; i < subcommand.positionals.size(); ++i) {
      const CompletionOption& positional = subcommand.positionals[i];
      if (positional.value == ValueKind::kCommandLine) {
        specs += "        '*:: :_normal'\n";
        break;
      }
      specs += "        '" + std::to_string(i + 1) + zshQuoted(zshValue(positional)) + "'\n";
    }
    cases += "        " + subcommand.name + ")\n          local -a specs=(\n" + specs +
             "          )\n          _arguments -s -S $specs && ret=0\n          ;;\n";
  }
  return R"(#compdef flink-gpu
# zsh completion for flink-gpu. Made by `flink-gpu completion zsh` from the command line
# flink-gpu itself parses: remake it rather than edit it. Installed as _flink-gpu in a folder of
# $fpath (/usr/share/zsh/vendor-completions on Debian).

_flink-gpu() {
  local curcontext=$curcontext state state_descr line ret=1
  typeset -A opt_args
  local -a globals=(
)" + globals +
         R"(  )
  _arguments -C -s $globals \
    '1: :->command' \
    '*:: :->argument' && ret=0
  case $state in
    command)
      local -a commands=(
)" + commands +
         R"(      )
      _describe -t commands 'flink-gpu command' commands && ret=0
      ;;
    argument)
      curcontext=${curcontext%:*:*}:flink-gpu-$words[1]:
      case $words[1] in
)" + cases +
         R"(      esac
      ;;
  esac
  return ret
}

_flink-gpu "$@"
)";
}

int runCompletion(const CompletionOptions& options) {
  std::cout << (options.shell == CompletionShell::kBash ? bashCompletion(options.model)
                                                        : zshCompletion(options.model));
  return kSuccess;
}

}  // namespace flink::cli
