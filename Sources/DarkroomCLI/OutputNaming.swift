import Darkroom
import DarkroomCore
import Foundation

/// How the runner names each input's outputs so that distinct inputs never share a file.
///
/// `{name}` is an input's base name without its extension, cleaned (letters, digits, `-`, `_`
/// and `.` kept, anything else `_`). Before anything runs, every output name of the run is worked
/// out from the templates of its `write` and `save` stages (``OutputPattern``), for every input
/// and variant, compared without case (as some file systems do) and without the parts that
/// depend on the image (`{ext}`, `{width}`…). Inputs whose outputs would meet — `a.jpg` and
/// `a.png`, `x/a.jpg` and `y/a.jpg` with `--recursive`, `a b.jpg` and `a_b.jpg`, or under
/// `{name}-{variant}` the input `a.jpg` in variant `b-c` and `a-b.png` in variant `c` — are each
/// named with their own extension added (`a-jpg`, `a-png`) or, when that still leaves two alike,
/// with the first 8 hex digits of a SHA-256 of their absolute path or URL (`a-3f9c1e07`); a name
/// made so that still meets another input's gets a longer digest. The names depend only on the
/// set of inputs and templates, never on which image finishes first. An input given twice is run
/// once.
enum OutputNaming {
  /// `sources` without repeats (the first of each kept, by request identity), and how many went.
  static func distinct(_ sources: [ImageSource]) -> (sources: [ImageSource], repeated: Int) {
    var seen = Set<String>()
    let kept = sources.filter { seen.insert($0.requestIdentity).inserted }
    return (kept, sources.count - kept.count)
  }

  /// `sources` with names that keep apart the outputs that `patterns` would make alike.
  static func disambiguated(_ sources: [ImageSource], patterns: [OutputPattern] = [.plain]) -> [ImageSource] {
    // Each pattern's template read once, not once an input: ~10 µs an input before.
    let stemPieces = Array(Set(patterns.filter(\.dependsOnName))).map(\.stemPieces)
    // Each output path as a 64-bit key, not a string: 10,000 inputs' paths held as strings in
    // sets took 5 MB of the runner's peak. Two paths sharing a key only cost an extra suffix.
    func stems(_ name: String) -> [UInt64] {
      Array(Set(stemPieces.map { OutputPattern.key(OutputPattern.stem($0, name: name)) })).sorted()
    }
    var result = sources
    // First, the inputs of each group whose outputs meet get their extensions, when that keeps
    // them apart from each other and from every output name already in use.
    // Each input's stems, made once: a name and its stems cost ~20 µs an input (200 inputs
    // named before the first transfer starts).
    let initialStems = sources.map { stems($0.name) }
    var taken = Set<UInt64>(minimumCapacity: sources.count * stemPieces.count)
    for made in initialStems { taken.formUnion(made) }
    for members in meetings(initialStems) {
      let withExtension = members.map { suffixed(sources[$0].name, "-" + extensionOf(sources[$0])) }
      let made = withExtension.map(stems)
      let usable =
        made.reduce(0) { $0 + $1.count } == made.reduce(into: Set<UInt64>()) { $0.formUnion($1) }.count
        && made.allSatisfy { taken.isDisjoint(with: $0) }
      for (position, index) in members.enumerated() {
        result[index].name =
          usable
          ? withExtension[position] : suffixed(sources[index].name, "-" + RequestDigest.hex(sources[index].identity, bytes: 4))
        taken.formUnion(stems(result[index].name))
      }
    }
    // A made name can still meet another input's (`a-3f9c1e07.jpg` beside `a.jpg` and `a.png`):
    // every input whose outputs still meet another's gets a digest, longer each round.
    var digestBytes = 4
    while digestBytes <= 32 {
      let groups = meetings(result.map { stems($0.name) })
      if groups.isEmpty { break }
      for index in groups.joined() {
        result[index].name = suffixed(sources[index].name, "-" + RequestDigest.hex(sources[index].identity, bytes: digestBytes))
      }
      digestBytes *= 2
    }
    return result
  }

  /// Names up to this many bytes take a suffix whole; a longer name keeps its length, the suffix
  /// replacing its end, so that a name that fitted the file system's 255 bytes still does.
  static let suffixedNameBytes = 200

  /// `name` with `suffix` added, within ``suffixedNameBytes`` or the name's own length.
  static func suffixed(_ name: String, _ suffix: String) -> String {
    let budget = max(suffixedNameBytes, name.utf8.count)
    guard name.utf8.count + suffix.utf8.count > budget else { return name + suffix }
    var kept = ""
    for character in name {
      guard kept.utf8.count + character.utf8.count + suffix.utf8.count <= budget else { break }
      kept.append(character)
    }
    return kept + suffix
  }

  /// The groups of inputs (by index) whose output names meet, directly or through others: each
  /// group in ascending order, the groups in the order of their first member.
  static func meetings(_ stems: [[UInt64]]) -> [[Int]] {
    var owner: [UInt64: Int] = [:]
    var parent = Array(stems.indices)  // a union-find forest over the inputs
    func root(_ index: Int) -> Int {
      var index = index
      while parent[index] != index {
        parent[index] = parent[parent[index]]
        index = parent[index]
      }
      return index
    }
    var meeting = Set<Int>()
    for (index, names) in stems.enumerated() {
      for name in names {
        guard let other = owner[name] else {
          owner[name] = index
          continue
        }
        parent[root(index)] = root(other)
        meeting.insert(index)
        meeting.insert(other)
      }
    }
    var groups: [Int: [Int]] = [:]
    for index in meeting.sorted() { groups[root(index), default: []].append(index) }
    return groups.values.sorted { $0[0] < $1[0] }
  }

  /// The source's own extension, cleaned, or `noext`.
  static func extensionOf(_ source: ImageSource) -> String {
    let ext: String
    switch source.location {
    case .file(let path): ext = PathText.pathExtension(path)
    case .url(let url): ext = url.pathExtension
    case .malformed: ext = ""
    }
    let cleaned = ext.lowercased().filter { $0.isLetter || $0.isNumber }
    return cleaned.isEmpty ? "noext" : String(cleaned.prefix(8))
  }
}

/// One way the run names output files: a `write` or `save` stage's directory and template, with
/// the pipeline and variant it runs in.
struct OutputPattern: Hashable {
  var directory: String
  var template: String
  var pipeline: String
  var variant: String?

  /// The bare `{name}`: what the naming compares when no templates are known.
  static let plain = OutputPattern(directory: "", template: "{name}", pipeline: "", variant: nil)

  /// A stable 64-bit key of an output path (FNV-1a over its UTF-8 bytes): the same in every run,
  /// so the names made from it are too.
  static func key(_ stem: String) -> UInt64 {
    stem.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x0000_0100_0000_01b3 }
  }

  /// The placeholders whose values come from the image, not from the input or the variant.
  static let imagePlaceholders = ["{width}", "{height}", "{format}", "{ext}"]

  /// Whether the output name changes with the input's name (a template without `{name}` maps
  /// every input onto one file, which `OutputClaims` refuses for all but the first).
  var dependsOnName: Bool { template.contains("{name}") }

  /// The output path cut at each `{name}`: `directory/` and the template, with every other
  /// placeholder filled (the image's as empty), read in one pass from the left as
  /// ``Writer/fill(_:_:)`` reads it; `nil` where the name goes.
  var stemPieces: [String?] {
    var values = ["{variant}": variant ?? pipeline, "{pipeline}": pipeline]
    for placeholder in Self.imagePlaceholders { values[placeholder] = "" }
    var pieces = Writer.pieces(template, values, leavingOpen: "{name}")
    pieces[0] = directory + "/" + (pieces[0] ?? "")
    return pieces
  }

  /// The output path for an input named `name` from a pattern's ``stemPieces``, lowercased, with
  /// the parts that depend on the image left out (so two inputs whose stems are equal may meet,
  /// and others never do).
  static func stem(_ pieces: [String?], name: String) -> String {
    var path = ""
    for piece in pieces { path += piece ?? name }
    return path.lowercased()
  }

  /// The patterns of every `write` and `save` stage in `graphs` (one per variant).
  static func all(in graphs: [(graph: StageGraph, variant: String?)]) -> [OutputPattern] {
    graphs.flatMap { graph, variant in
      graph.stages.compactMap { stage -> OutputPattern? in
        if let writer = stage.base as? Writer {
          return OutputPattern(directory: writer.directory, template: writer.template, pipeline: graph.name, variant: variant)
        }
        if let saver = stage.base as? BytesWriter {
          return OutputPattern(directory: saver.directory, template: saver.template, pipeline: graph.name, variant: variant)
        }
        return nil
      }
    }
  }
}
