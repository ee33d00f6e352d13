import DarkroomCore

/// Picks the output format for `format: "auto"` (and thumbor's behaviour with no `format`
/// filter) from the request's `Accept` header.
///
/// The first format of ``preferred`` (AVIF, then WebP, by default) that `Accept` names with a
/// quality above 0 is chosen (wildcards do not count); otherwise JPEG, or PNG for an image with alpha.
/// An animated source gets WebP when `Accept` names it, else GIF (``Choice/animatedFormat``). The answer says
/// whether it depended on `Accept` (then the response carries `Vary: Accept`, and the chosen format
/// is part of the result-cache key). An `Accept` header is read up to 4,096 bytes and 64 entries;
/// what does not parse is ignored, as a browser's header never needs it.
///
/// ```swift
/// let negotiation = FormatNegotiation()
/// let choice = negotiation.choose(accept: "image/avif,image/webp,*/*;q=0.8", hasAlpha: false)
/// print(choice.format, choice.variesOnAccept)   // avif true
/// ```
public struct FormatNegotiation: Sendable {
  /// The formats tried in order before the fallback (configurable; AVIF then WebP by default).
  public var preferred: [ImageFormat]

  public init(preferred: [ImageFormat] = [.avif, .webp]) { self.preferred = preferred }

  /// The format chosen, and whether the choice depended on `Accept`.
  public struct Choice: Sendable, Equatable {
    public var format: ImageFormat
    public var variesOnAccept: Bool
    /// The format for an animated source: WebP when `Accept` names it (and WebP is preferred),
    /// else GIF, which every client reads.
    public var animatedFormat: ImageFormat

    public init(format: ImageFormat, variesOnAccept: Bool, animatedFormat: ImageFormat = .gif) {
      self.format = format
      self.variesOnAccept = variesOnAccept
      self.animatedFormat = animatedFormat
    }
  }

  /// The format for a response to a request with `accept` (`nil` when it had none).
  public func choose(accept: String?, hasAlpha: Bool) -> Choice {
    let fallback: ImageFormat = hasAlpha ? .png : .jpeg
    guard !preferred.isEmpty else { return Choice(format: fallback, variesOnAccept: false) }
    let ranges = Self.ranges(accept ?? "")
    let animated: ImageFormat =
      preferred.contains(.webp) && Self.quality(of: ImageFormat.webp.mimeType, in: ranges) > 0 ? .webp : .gif
    for format in preferred where Self.quality(of: format.mimeType, in: ranges) > 0 {
      return Choice(format: format, variesOnAccept: true, animatedFormat: animated)
    }
    return Choice(format: fallback, variesOnAccept: true, animatedFormat: animated)
  }

  /// The media ranges of an `Accept` header with their qualities (1 when not given).
  static func ranges(_ header: String) -> [(type: String, subtype: String, quality: Double)] {
    var result: [(String, String, Double)] = []
    for entry in header.utf8.prefix(4_096).split(separator: UInt8(ascii: ",")).prefix(64) {
      let parameters = entry.split(separator: UInt8(ascii: ";")).map { String(decoding: $0, as: UTF8.self) }
      guard let range = parameters.first?.trimmingCharacters(in: .whitespaces).lowercased() else { continue }
      let parts = range.split(separator: "/", omittingEmptySubsequences: false)
      guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { continue }
      var quality = 1.0
      for parameter in parameters.dropFirst() {
        let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
        guard pair.count == 2, pair[0].lowercased() == "q" else { continue }
        // RFC 9110 qvalue: 0 to 1 with up to three decimals; anything else is not a quality.
        guard pair[1].count <= 5, let value = Double(pair[1]), value >= 0, value <= 1 else {
          quality = 0
          continue
        }
        quality = value
      }
      result.append((String(parts[0]), String(parts[1]), quality))
    }
    return result
  }

  /// The quality `ranges` give `mimeType` by name: wildcards (`*/*`, `image/*`) do not count, as
  /// in thumbor and imgproxy, since clients that send only them (curl, older browsers) may not
  /// decode AVIF or WebP.
  static func quality(of mimeType: String, in ranges: [(type: String, subtype: String, quality: Double)]) -> Double {
    ranges.last { "\($0.type)/\($0.subtype)" == mimeType }?.quality ?? 0
  }
}
