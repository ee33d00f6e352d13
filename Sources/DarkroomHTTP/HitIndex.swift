import Darkroom

/// The result-cache keys of URLs answered before, so that a repeated request is answered from
/// memory without reading its URL into stages again (the cache-hit path of an image server).
///
/// An entry maps a request's exact path (its signature included, so only a URL whose signature
/// was checked is ever indexed) and the format its `Accept` chooses to the result key its plan
/// made. Only plans that are a pure function of those two are indexed: thumbor URLs whose source
/// is a URL. A local file's key holds its version, and a preset can change, so those always go
/// the full way.
final class HitIndex: Sendable {
  struct Entry: Sendable {
    var resultKey: String
    var variesOnAccept: Bool
  }

  private let entries: MemoryCache<String, Entry>

  /// An index holding keys of at most `bytes` bytes in all.
  init(bytes: Int) { entries = MemoryCache(costLimit: bytes) }

  /// The index key of a request: its path and the formats its `Accept` picks (for a still source
  /// and for an animated one).
  static func key(path: String, choice: FormatNegotiation.Choice) -> String {
    path + "\u{1F}" + choice.format.rawValue + "\u{1F}" + choice.animatedFormat.rawValue
  }

  func entry(for key: String) -> Entry? { entries.value(forKey: key) }

  func remember(_ entry: Entry, for key: String) {
    entries.setValue(entry, forKey: key, cost: key.utf8.count + entry.resultKey.utf8.count + 64)
  }
}
