import ArgumentParser
import Foundation

/// The positional values of a long command line (`darkroom run P a1 … a16000`), gathered into one
/// argument before swift-argument-parser sees them and spread out again by the command.
///
/// swift-argument-parser (1.8) stores each value of an array argument by copying what it holds
/// so far, and afterwards removes the used arguments one at a time, each removal walking the
/// arguments left: parsing grows with the square of their number (16,000 paths took about 45 s
/// before the first image). Gathered, the parser sees one argument for all of them.
///
/// Which arguments are positional values is decided as the parser decides it, from the parser's
/// own description of the command (``CommandShape``): an option that takes a value takes the next
/// plain argument (grouped short options, `-oj out 4`, one each, in order), `--name=value` takes
/// none, a flag takes none, and after `--` every argument is positional. The command's single
/// positionals (the pipeline file) stay where they are; every later positional value is gathered,
/// in order, into one argument in the place of the first (it starts with a NUL, which no argument
/// given to a process can hold). Options between them keep their order among themselves; a flag
/// given again is dropped (it changes nothing, and thousands of them cost the parser as much).
///
/// ```swift
/// let (arguments, folded) = FoldedArguments.fold(["run", "p.json", "a.jpg", "-j", "2", "b.jpg"])
/// // arguments: ["run", "p.json", "\0", "-j", "2"]
/// folded.unfold(["\0"])  // ["a.jpg", "b.jpg"]
/// ```
struct FoldedArguments: Sendable {
  /// The values gathered, in order, which the marker stands for.
  private var gathered: [String] = []

  /// The argument standing for them: no argument given to a process can hold a NUL.
  static let marker = "\u{0}"

  /// Command lines shorter than this are parsed as they are.
  static let threshold = 64

  /// The subcommands whose positional values are gathered, as the words that name them.
  static let foldedCommands: [(words: [String], shape: @Sendable () -> CommandShape?)] = [
    (["run"], { CommandShape(RunCommand.self) }), (["validate"], { CommandShape(ValidateCommand.self) }),
    (["cache", "purge"], { CommandShape(CacheCommand.Purge.self) }),
  ]

  /// `arguments` (without the program name) with the positional values gathered, for the
  /// subcommands in ``foldedCommands``; any other command line, or a short one, as it is.
  static func fold(_ arguments: [String]) -> (arguments: [String], folded: FoldedArguments) {
    var folded = FoldedArguments()
    guard arguments.count >= threshold, let command = foldedCommands.first(where: { arguments.starts(with: $0.words) }),
      let shape = command.shape()
    else { return (arguments, folded) }
    var result = command.words
    var singlesLeft = shape.singlePositionals
    var valuesOwed = 0  // plain arguments the options just seen take as their values
    var afterTerminator = false
    var flagsSeen: Set<String> = []
    for argument in arguments.dropFirst(command.words.count) {
      let plain = afterTerminator || !argument.hasPrefix("-") || argument == "-"
      if !plain, shape.flags.contains(argument), !flagsSeen.insert(argument).inserted {
        continue  // a flag given again changes nothing, and thousands of them cost the parser as much
      } else if !plain {
        afterTerminator = argument == "--"
        valuesOwed = afterTerminator ? 0 : shape.valuesTaken(by: argument)
        result.append(argument)
      } else if valuesOwed > 0 {
        valuesOwed -= 1
        result.append(argument)
      } else if singlesLeft > 0 {
        singlesLeft -= 1
        result.append(argument)
      } else {
        if folded.gathered.isEmpty { result.append(marker) }
        folded.gathered.append(argument)
      }
    }
    return (result, folded)
  }

  /// `values` (a command's positional values) with the marker replaced by the values it stands
  /// for, in place.
  func unfold(_ values: [String]) -> [String] {
    guard let index = values.firstIndex(of: Self.marker) else { return values }
    var result = values
    result.replaceSubrange(index...index, with: gathered)
    return result
  }

}

/// What folding needs to know of a command, read from swift-argument-parser's own description of
/// it (`_dumpHelp()`, the JSON behind `--experimental-dump-help`): which option names take a value,
/// and how many single positionals come before the repeating one.
struct CommandShape: Sendable {
  /// `--output`, `-o`, … : the names of options that take a value.
  var valueOptions: Set<String>
  /// `--recursive`, … : the names of flags that are set once (giving one again changes nothing).
  var flags: Set<String>
  /// Positionals taken once, before the one that repeats (`run`: the pipeline file).
  var singlePositionals: Int

  init(valueOptions: Set<String>, flags: Set<String>, singlePositionals: Int) {
    self.valueOptions = valueOptions
    self.flags = flags
    self.singlePositionals = singlePositionals
  }

  /// The shape of `command`; `nil` when its description cannot be read (nothing is folded then).
  init?(_ command: any ParsableCommand.Type) {
    guard let data = command._dumpHelp().data(using: .utf8),
      let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
      let description = root["command"] as? [String: Any], let arguments = description["arguments"] as? [[String: Any]]
    else { return nil }
    var options: Set<String> = []
    var flags: Set<String> = []
    var singles = 0
    var repeatingSeen = false
    for argument in arguments {
      switch argument["kind"] as? String {
      case "option":
        for name in argument["names"] as? [[String: Any]] ?? [] {
          guard let text = name["name"] as? String else { continue }
          options.insert((name["kind"] as? String == "long" ? "--" : "-") + text)
        }
      case "flag" where argument["isRepeating"] as? Bool != true:
        for name in argument["names"] as? [[String: Any]] ?? [] {
          guard let text = name["name"] as? String else { continue }
          flags.insert((name["kind"] as? String == "long" ? "--" : "-") + text)
        }
      case "positional":
        if argument["isRepeating"] as? Bool == true { repeatingSeen = true } else if !repeatingSeen { singles += 1 }
      default: continue
      }
    }
    guard repeatingSeen else { return nil }
    self.init(valueOptions: options, flags: flags, singlePositionals: singles)
  }

  /// How many following plain arguments `argument` (starting with `-`) takes as values: 1 for an
  /// option with a value not attached with `=`, one per value-taking letter of grouped short
  /// options, 0 for flags and unknown names (the parser rejects those itself).
  func valuesTaken(by argument: String) -> Int {
    if argument.hasPrefix("--") { return !argument.contains("=") && valueOptions.contains(argument) ? 1 : 0 }
    if argument.contains("=") { return 0 }
    return argument.dropFirst().reduce(0) { $0 + (valueOptions.contains("-" + String($1)) ? 1 : 0) }
  }
}
