import DarkroomCore
import Foundation

/// A thumbor URL, parsed: what to fetch and what to do with it.
///
/// The grammar is thumbor's, so that existing thumbor clients and URL builders work unchanged:
/// `/{signature|unsafe}/[trim/][AxB:CxD/][fit-in/|adaptive-fit-in/|full-fit-in/][-]Wx[-]H/`
/// `[left|center|right/][top|middle|bottom/][smart/][filters:NAME(ARGS):…/]IMAGE`. Every part but
/// the image is optional; parts come in this order. Sizes are range-checked before use, and an
/// unknown filter is kept by name for the caller to refuse.
///
/// ```swift
/// let url = try ThumborURL(path: "/unsafe/fit-in/300x200/smart/filters:quality(80)/example.com/a.jpg")
/// print(url.width, url.height, url.fit, url.filters.map(\.name), url.image)   // 300 200 fitIn ["quality"] example.com/a.jpg
/// ```
public struct ThumborURL: Sendable, Equatable {
  /// How the image is fitted into the size.
  public enum Fit: String, Sendable, Equatable {
    /// Fill the size and crop what is over (thumbor's default).
    case fill
    /// Fit inside the size (`fit-in`).
    case fitIn = "fit-in"
    /// Fit inside, swapping width and height when that keeps more of the image (`adaptive-fit-in`).
    case adaptiveFitIn = "adaptive-fit-in"
    /// Cover the size, never smaller than it (`full-fit-in`).
    case fullFitIn = "full-fit-in"
  }

  /// A filter as written: `quality(80)` is name `quality` and arguments `["80"]`.
  public struct Filter: Sendable, Equatable {
    public var name: String
    public var arguments: [String]

    public init(name: String, arguments: [String]) {
      self.name = name
      self.arguments = arguments
    }
  }

  /// The signature segment, or `nil` for `unsafe`.
  public var signature: String?
  /// The part of the path the signature covers (everything after the signature and its slash).
  public var signedPath: String
  public var trim = false
  /// `trim:bottom-right`: the border's colour is the bottom-right pixel's (the top-left's by default).
  public var trimFromBottomRight = false
  /// `trim:…:N`: how far (0…442 in thumbor, RGB distance) a pixel may be from the border's colour.
  public var trimTolerance: Int?
  /// A manual crop: left, top, right, bottom, in the source's pixels.
  public var crop: (left: Int, top: Int, right: Int, bottom: Int)?
  public var fit = Fit.fill
  /// The width and height asked for; 0 keeps the source's proportion on that side.
  public var width = 0
  public var height = 0
  /// A `-` before the width or the height: flip on that axis.
  public var flipHorizontally = false
  public var flipVertically = false
  public var horizontalAlignment = "center"
  public var verticalAlignment = "middle"
  public var smart = false
  public var filters: [Filter] = []
  /// The image: an absolute URL (percent-decoded when it was encoded), a `host/path` (http is
  /// assumed, as thumbor does) or a path for an origin or a local root.
  public var image: String

  /// The largest width or height a URL may ask for.
  public static let maxSide = 65_500

  public static func == (lhs: ThumborURL, rhs: ThumborURL) -> Bool {
    lhs.signature == rhs.signature && lhs.signedPath == rhs.signedPath
  }

  /// Parses a request path (starting with `/`, without the query). Throws `invalidInput` naming
  /// the part that is wrong.
  public init(path: String) throws(PipelineError) {
    guard path.hasPrefix("/") else { throw Self.bad("the path must start with /") }
    let afterSlash = path.dropFirst()
    guard let end = afterSlash.firstIndex(of: "/") else {
      throw Self.bad("the path needs a signature (or unsafe) and an image")
    }
    let first = String(afterSlash[..<end])
    signature = first == "unsafe" ? nil : first
    guard signature.map({ !$0.isEmpty }) ?? true else { throw Self.bad("the signature is empty") }
    signedPath = String(afterSlash[afterSlash.index(after: end)...])
    image = ""
    var rest = Substring(signedPath)
    func segment() -> Substring? { rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first }
    func advance(_ used: Substring) {
      rest = rest.dropFirst(used.count)
      if rest.hasPrefix("/") { rest = rest.dropFirst() }
    }

    if let part = segment(), part == "trim" || part.hasPrefix("trim:") {
      trim = true
      for option in part.split(separator: ":").dropFirst() {
        if option == "top-left" || option == "bottom-right" {
          trimFromBottomRight = option == "bottom-right"
        } else if option.count <= 3, let tolerance = Int(option), (0...442).contains(tolerance) {
          trimTolerance = tolerance
        } else {
          throw Self.bad("trim takes top-left or bottom-right and a tolerance of 0 to 442, not \(option.prefix(16))")
        }
      }
      advance(part)
    }
    if let part = segment(), let box = Self.crop(part) {
      crop = box
      advance(part)
    }
    if let part = segment(), let found = Fit(rawValue: String(part)), found != .fill {
      fit = found
      advance(part)
    }
    if let part = segment(), let size = try Self.size(part) {
      (width, flipHorizontally, height, flipVertically) = size
      advance(part)
    }
    if let part = segment(), ["left", "center", "right"].contains(part) {
      horizontalAlignment = String(part)
      advance(part)
    }
    if let part = segment(), ["top", "middle", "bottom"].contains(part) {
      verticalAlignment = String(part)
      advance(part)
    }
    if let part = segment(), part == "smart" {
      smart = true
      advance(part)
    }
    if rest.hasPrefix("filters:") {
      // Filter arguments may hold slashes (a watermark's URL): the list ends at the first ")/".
      guard let close = rest.range(of: ")/") else { throw Self.bad("the filters need a closing ) and then the image") }
      filters = try Self.filters(rest[rest.index(rest.startIndex, offsetBy: 8)..<close.upperBound].dropLast())
      rest = rest[close.upperBound...]
    }
    guard !rest.isEmpty else { throw Self.bad("the path has no image") }
    guard let decoded = rest.removingPercentEncoding else { throw Self.bad("the image has a broken %-escape") }
    image = decoded
  }

  private static func bad(_ message: String) -> PipelineError {
    PipelineError(.invalidInput, "not a thumbor URL: \(message)")
  }

  /// A non-negative decimal of at most 6 digits, or `nil`.
  private static func number(_ text: Substring) -> Int? {
    guard !text.isEmpty, text.count <= 6, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
    return Int(text)
  }

  private static func crop(_ part: Substring) -> (left: Int, top: Int, right: Int, bottom: Int)? {
    let corners = part.split(separator: ":", omittingEmptySubsequences: false)
    guard corners.count == 2 else { return nil }
    let points = corners.map { $0.split(separator: "x", omittingEmptySubsequences: false) }
    guard points.allSatisfy({ $0.count == 2 }) else { return nil }
    guard let left = number(points[0][0]), let top = number(points[0][1]), let right = number(points[1][0]),
      let bottom = number(points[1][1])
    else { return nil }
    return (left, top, right, bottom)
  }

  /// `[-]W x [-]H`, either side empty (0); `nil` when the segment is not a size.
  private static func size(_ part: Substring) throws(PipelineError) -> (Int, Bool, Int, Bool)? {
    let sides = part.split(separator: "x", omittingEmptySubsequences: false)
    guard sides.count == 2 else { return nil }
    func side(_ text: Substring) -> (digits: Substring, flip: Bool)? {
      let flip = text.hasPrefix("-")
      let digits = flip ? text.dropFirst() : text
      guard digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
      return (digits, flip)
    }
    guard let (widthDigits, flipWidth) = side(sides[0]), let (heightDigits, flipHeight) = side(sides[1]) else { return nil }
    // A size, so its numbers are checked: too long or too large is an error, not an image name.
    func value(_ digits: Substring) throws(PipelineError) -> Int {
      guard !digits.isEmpty else { return 0 }
      guard let number = number(digits), number <= maxSide else {
        throw bad("the size \(part) is over \(maxSide) pixels on a side")
      }
      return number
    }
    let width = try value(widthDigits)
    let height = try value(heightDigits)
    return (width, flipWidth, height, flipHeight)
  }

  /// `name(args):name(args)…`, arguments split at top-level commas.
  private static func filters(_ text: Substring) throws(PipelineError) -> [Filter] {
    var result: [Filter] = []
    var rest = text
    while !rest.isEmpty {
      guard let open = rest.firstIndex(of: "(") else { throw bad("the filter \(rest) has no (") }
      let name = String(rest[..<open])
      guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
        throw bad("a filter name must be letters, digits or _, not \(name.debugDescription)")
      }
      var depth = 0
      var close: Substring.Index?
      for index in rest[open...].indices {
        if rest[index] == "(" { depth += 1 }
        if rest[index] == ")" {
          depth -= 1
          if depth == 0 {
            close = index
            break
          }
        }
      }
      guard let close else { throw bad("the filter \(name) has no closing )") }
      let inside = rest[rest.index(after: open)..<close]
      let arguments = inside.isEmpty ? [] : inside.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
      result.append(Filter(name: name, arguments: arguments))
      rest = rest[rest.index(after: close)...]
      if rest.hasPrefix(":") { rest = rest.dropFirst() } else if !rest.isEmpty { throw bad("filters are separated by :") }
      guard result.count <= 64 else { throw bad("more than 64 filters") }
    }
    return result
  }
}
