/// Where a load's result goes — a response being assembled, a client's slot, a view — named by
/// the caller. Loads for one target are delivered in the order they were asked for, and the
/// loader remembers the most recent source asked for each target while it has loads.
///
/// ```swift
/// let slot = LoadTarget("user-42-avatar")
/// loader.load(ImageSource(thumbnailURL), pipeline: small, target: slot, tag: "thumbnail")
/// loader.load(ImageSource(fullURL), pipeline: large, target: slot, tag: "full")
/// ```
public struct LoadTarget: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
  /// The caller's name for the target.
  public let name: String

  public init(_ name: String) { self.name = name }
  public init(stringLiteral name: String) { self.name = name }

  public var description: String { name }
}
