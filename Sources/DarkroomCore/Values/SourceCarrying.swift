/// A value that records the source it came from (fetched bytes, decoded and encoded images).
///
/// A cache entry is shared by every run whose key matches, and a store rebuilds the source of a
/// value it reads back from the key. A value served from a cache is therefore given the source of
/// the run that asked for it, so that a `write` stage names the output after this run's input
/// (`{name}`), never after the run that stored the entry.
///
/// ```swift
/// struct Thumbnail: SourceCarrying { var source: ImageSource; var pixels: [UInt8] }
/// ```
package protocol SourceCarrying: Sendable {
  /// The source the value came from.
  var source: ImageSource { get set }
}

extension SourceCarrying {
  /// The same value, recorded as coming from `source`.
  public func carrying(_ source: ImageSource) -> Self {
    var copy = self
    copy.source = source
    return copy
  }
}

extension FetchedData: SourceCarrying {}
extension EncodedImage: SourceCarrying {}

/// `value`, given `source` when it records one.
func rebound(_ value: any Sendable, to source: ImageSource?) -> any Sendable {
  guard let source, let carrying = value as? any SourceCarrying else { return value }
  return carrying.carrying(source)
}
