import Darkroom
import DarkroomCore
import Foundation

/// How the runner names each input's outputs so that distinct inputs never share a file.
///
/// `{name}` is an input's base name without its extension, cleaned (letters, digits, `-`, `_`
/// and `.` kept, anything else `_`). When several inputs of one run would get the same `{name}`
/// (compared without case, as some file systems do) — `a.jpg` and `a.png`, `x/a.jpg` and
/// `y/a.jpg` with `--recursive`, `a b.jpg` and `a_b.jpg` — each of them is named with its own
/// extension added (`a-jpg`, `a-png`) or, when that still leaves two alike, with the first 8 hex
/// digits of a SHA-256 of its absolute path or URL (`a-3f9c1e07`); a name made so that still
/// equals another input's gets a longer digest. An input given twice is run once.
enum OutputNaming {
  /// `sources` without repeats (the first of each kept, by request identity), and how many went.
  static func distinct(_ sources: [ImageSource]) -> (sources: [ImageSource], repeated: Int) {
    var seen = Set<String>()
    let kept = sources.filter { seen.insert($0.requestIdentity).inserted }
    return (kept, sources.count - kept.count)
  }

  /// `sources` with names that tell apart the inputs whose `{name}` would be alike.
  static func disambiguated(_ sources: [ImageSource]) -> [ImageSource] {
    var result = sources
    let natural = sources.map { $0.name.lowercased() }
    var groups: [String: [Int]] = [:]
    for (index, name) in natural.enumerated() { groups[name, default: []].append(index) }
    var taken = Set(natural)
    for (_, members) in groups where members.count > 1 {
      let withExtension = members.map { sources[$0].name + "-" + OutputNaming.extensionOf(sources[$0]) }
      let lowered = withExtension.map { $0.lowercased() }
      let usable = Set(lowered).count == members.count && taken.isDisjoint(with: lowered)
      for (position, index) in members.enumerated() {
        let name =
          usable ? withExtension[position] : sources[index].name + "-" + RequestDigest.hex(sources[index].identity, bytes: 4)
        result[index].name = name
        taken.insert(name.lowercased())
      }
    }
    // A made name can still equal another input's own (`a-3f9c1e07.jpg` beside `a.jpg` and
    // `a.png`): every name still shared gets a digest, longer each round, until none is.
    var digestBytes = 4
    while digestBytes <= 32 {
      var owners: [String: [Int]] = [:]
      for (index, source) in result.enumerated() { owners[source.name.lowercased(), default: []].append(index) }
      let shared = owners.values.filter { $0.count > 1 }
      if shared.isEmpty { break }
      for members in shared {
        for index in members {
          result[index].name = sources[index].name + "-" + RequestDigest.hex(sources[index].identity, bytes: digestBytes)
        }
      }
      digestBytes *= 2
    }
    return result
  }

  /// The source's own extension, cleaned, or `noext`.
  static func extensionOf(_ source: ImageSource) -> String {
    let ext: String
    switch source.location {
    case .file(let path): ext = (path as NSString).pathExtension
    case .url(let url): ext = url.pathExtension
    case .malformed: ext = ""
    }
    let cleaned = ext.lowercased().filter { $0.isLetter || $0.isNumber }
    return cleaned.isEmpty ? "noext" : String(cleaned.prefix(8))
  }
}
