/// Long runs of positional arguments (`darkroom run P a1 … a16000`), folded into one argument
/// each before swift-argument-parser sees them and unfolded again by the command.
///
/// swift-argument-parser (1.8) stores each value of an array argument by copying what it holds
/// so far, and afterwards removes the used arguments one at a time, each removal walking the
/// arguments left: parsing grows with the square of their number (16,000 paths took about 45 s
/// before the first image). Folded, the parser sees a handful of arguments whatever the count.
///
/// Only the subcommands that take many positional values are folded (`run`, `validate`,
/// `cache purge`). Within them every option takes at most one value, so in a run of arguments
/// that do not start with `-` only the first can be an option's value (`--output out`) and only
/// the second the pipeline file: the first two stay as they are, and the rest of the run becomes
/// one argument naming it (starting with a NUL, which no argument given to a process can hold).
/// After `--` every argument is positional, whatever it starts with.
///
/// ```swift
/// let (arguments, folded) = FoldedArguments.fold(["run", "p.json", "a.jpg", "b.jpg", "c.jpg"])
/// // arguments: ["run", "p.json", "a.jpg", "\0" + "0"]
/// folded.unfold(["a.jpg", "\0" + "0"])  // ["a.jpg", "b.jpg", "c.jpg"]
/// ```
struct FoldedArguments: Sendable {
  /// The runs taken out, in order; a folded argument is the marker and an index into them.
  private var runs: [[String]] = []

  /// What a folded argument starts with: no argument given to a process can hold a NUL.
  static let marker: Character = "\u{0}"

  /// The subcommands whose positional values are folded, as the words that name them.
  static let foldedCommands: [[String]] = [["run"], ["validate"], ["cache", "purge"]]

  /// `arguments` (without the program name) with long runs of positional values folded, for the
  /// subcommands in ``foldedCommands``; any other command line as it is.
  static func fold(_ arguments: [String]) -> (arguments: [String], folded: FoldedArguments) {
    var folded = FoldedArguments()
    guard let command = foldedCommands.first(where: { arguments.starts(with: $0) }) else { return (arguments, folded) }
    var result = command
    var pending: [String] = []  // the run being folded
    var runLength = 0  // plain arguments in a row so far
    var afterTerminator = false
    func flush() {
      guard !pending.isEmpty else { return }
      result.append(String(marker) + String(folded.runs.count))
      folded.runs.append(pending)
      pending = []
    }
    for argument in arguments.dropFirst(command.count) {
      let plain = afterTerminator || !argument.hasPrefix("-")
      guard plain else {
        flush()
        runLength = 0
        afterTerminator = argument == "--"
        result.append(argument)
        continue
      }
      runLength += 1
      if runLength <= 2 { result.append(argument) } else { pending.append(argument) }
    }
    flush()
    return (result, folded)
  }

  /// `values` (a command's positional values) with every folded argument replaced by the run it
  /// stands for, in place.
  func unfold(_ values: [String]) -> [String] {
    var result: [String] = []
    result.reserveCapacity(values.count + runs.reduce(0) { $0 + $1.count })
    for value in values {
      if value.first == Self.marker, let index = Int(value.dropFirst()), runs.indices.contains(index) {
        result += runs[index]
      } else {
        result.append(value)
      }
    }
    return result
  }
}
