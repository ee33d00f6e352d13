/// A value that records the source it came from (fetched bytes, decoded and encoded images).
///
/// A cache entry is shared by every run whose key matches, and a store rebuilds the source of a
/// value it reads back from the key. A value served from a cache is therefore given the source of
/// the run that asked for it, so that a `write` stage names the output after this run's input
/// (`{name}`), never after the run that stored the entry.
///
/// ```swift
/// extension Thumbnail: SourceCarrying {
///   func carrying(_ source: ImageSource) -> Thumbnail { var copy = self; copy.source = source; return copy }
/// }
/// ```
public protocol SourceCarrying: Sendable {
  /// The same value, recorded as coming from `source`.
  func carrying(_ source: ImageSource) -> Self
}

extension FetchedData: SourceCarrying {
  public func carrying(_ source: ImageSource) -> FetchedData {
    var copy = self
    copy.source = source
    return copy
  }
}

extension EncodedImage: SourceCarrying {
  public func carrying(_ source: ImageSource) -> EncodedImage {
    var copy = self
    copy.source = source
    return copy
  }
}

/// `value`, given `source` when it records one.
func rebound(_ value: any Sendable, to source: ImageSource?) -> any Sendable {
  guard let source, let carrying = value as? any SourceCarrying else { return value }
  return carrying.carrying(source)
}
