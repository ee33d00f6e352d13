import Darkroom
import Foundation

/// Images made on the fly for tests: no fixtures to ship, every pixel known.
///
/// ```swift
/// let fetched = try TestImages.fetched(.jpeg, width: 640, height: 480)
/// let image = try ImageDecoder().decode(fetched)
/// ```
public enum TestImages {
  /// Pixels of a smooth gradient: red grows left to right, green top to bottom, blue constant.
  ///
  /// Made a row at a time through buffer pointers: tests build images of millions of pixels in
  /// debug builds, where indexing an array pixel by pixel takes seconds.
  public static func gradientPixels(width: Int, height: Int, bands: Int = 3) -> [UInt8] {
    let rowBytes = width * bands
    var row = [UInt8](repeating: 0, count: rowBytes)
    row.withUnsafeMutableBufferPointer { row in
      for x in 0..<width {
        let offset = x * bands
        row[offset] = UInt8(x * 255 / max(1, width - 1))
        if bands >= 3 { row[offset + 2] = 96 }
        if bands == 2 || bands == 4 { row[offset + bands - 1] = 255 }
      }
    }
    var pixels: [UInt8] = []
    pixels.reserveCapacity(rowBytes * height)
    for y in 0..<height {
      let start = pixels.count
      pixels.append(contentsOf: row)
      guard bands >= 3 else { continue }
      let green = UInt8(y * 255 / max(1, height - 1))
      pixels.withUnsafeMutableBufferPointer { pixels in
        for offset in stride(from: start + 1, to: start + rowBytes, by: bands) { pixels[offset] = green }
      }
    }
    return pixels
  }

  /// Pixels in four solid quadrants — red top-left, green top-right, blue bottom-left, white
  /// bottom-right — so crops, fills and orientations can be checked by colour.
  public static func quadrantPixels(width: Int, height: Int) -> [UInt8] {
    func row(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] {
      var row: [UInt8] = []
      row.reserveCapacity(width * 3)
      for x in 0..<width { row.append(contentsOf: x < width / 2 ? left : right) }
      return row
    }
    let top = row(Quadrant.red, Quadrant.green)
    let bottom = row(Quadrant.blue, Quadrant.white)
    var pixels: [UInt8] = []
    pixels.reserveCapacity(width * height * 3)
    for y in 0..<height { pixels.append(contentsOf: y < height / 2 ? top : bottom) }
    return pixels
  }

  /// The quadrant colours.
  public enum Quadrant {
    public static let red: [UInt8] = [255, 0, 0]
    public static let green: [UInt8] = [0, 255, 0]
    public static let blue: [UInt8] = [0, 0, 255]
    public static let white: [UInt8] = [255, 255, 255]
  }

  /// An encoded image file of the given format and size (gradient, or quadrants), optionally
  /// with an EXIF orientation tag.
  public static func encoded(
    _ format: EncodeFormat, width: Int, height: Int, quadrants: Bool = false, orientation: Int? = nil, alpha: Bool = false
  ) throws -> ImageBytes {
    let bands = alpha ? 4 : 3
    let pixels =
      quadrants ? quadrantPixels(width: width, height: height) : gradientPixels(width: width, height: height, bands: bands)
    var image = try VipsImage.fromPixels(pixels, width: width, height: height, bands: quadrants ? 3 : bands)
    if let orientation { image = try image.withOrientation(orientation) }
    let decoded = DecodedImage(
      source: ImageSource("memory"), image: image, sourceFormat: .png, sourceWidth: width, sourceHeight: height)
    return try ImageEncoder(format, keepMetadata: orientation != nil).encode(decoded).bytes
  }

  /// ``encoded(_:width:height:quadrants:orientation:alpha:)`` wrapped as fetched data.
  public static func fetched(
    _ format: EncodeFormat, width: Int, height: Int, quadrants: Bool = false, orientation: Int? = nil, alpha: Bool = false,
    name: String = "test"
  ) throws -> FetchedData {
    FetchedData(
      source: ImageSource(path: "\(name).img"),
      bytes: try encoded(format, width: width, height: height, quadrants: quadrants, orientation: orientation, alpha: alpha))
  }

  /// Writes an encoded test image into `directory` and returns its path.
  public static func write(_ bytes: ImageBytes, named name: String, in directory: String) throws -> String {
    let path = (directory as NSString).appendingPathComponent(name)
    try bytes.data.write(to: URL(fileURLWithPath: path))
    return path
  }
}

/// Colour comparison with a tolerance (lossy codecs shift colours a little).
public func colour(_ actual: [UInt8], isNear expected: [UInt8], tolerance: Int = 40) -> Bool {
  actual.count >= expected.count && zip(actual, expected).allSatisfy { abs(Int($0) - Int($1)) <= tolerance }
}
