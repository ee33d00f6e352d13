import Darkroom
import DarkroomTesting
import Foundation
import Testing

/// Tiled TIFFs with separate planes (decoded through libtiff's RGBA reader, which libvips 8.14
/// cannot do) come out as the same image stored contiguously would.
@Suite("Tiled planar TIFFs decode like contiguous ones")
struct PlanarTIFFTests {
  /// Pixels with every alpha from 0 to 255 and colours that differ by position.
  static func pixels(width: Int, height: Int, samples: Int) -> [UInt8] {
    var out: [UInt8] = []
    for y in 0..<height {
      for x in 0..<width {
        let colour = [UInt8((x * 7 + y) % 256), UInt8((y * 11) % 256), UInt8((x * y) % 256)]
        let alpha = UInt8((x * 13 + y * 5) % 256)
        switch samples {
        case 1: out += [colour[0]]
        case 2: out += [colour[0], alpha]
        case 3: out += colour
        default: out += colour + [alpha]
        }
      }
    }
    return out
  }

  func decode(_ data: Data, _ name: String) throws -> DecodedImage {
    try ImageDecoder().decode(HostileFiles.fetched(data, name))
  }

  @Test("bands, unassociated alpha and pixels match the source", arguments: [1, 2, 3, 4])
  func layouts(samples: Int) throws {
    let (width, height) = (37, 23)  // small 16×16 tiles, partial at the edges
    let source = Self.pixels(width: width, height: height, samples: samples)
    let decoded = try decode(
      HostileFiles.planarTiledTIFF(width: width, height: height, samples: samples, pixels: source), "planar.tif")
    #expect(decoded.image.bands == samples)
    #expect(decoded.width == width && decoded.height == height)
    let bytes = try decoded.image.pixelBytes()
    #expect(bytes.count == source.count)
    var worst = 0
    for pixel in 0..<width * height {
      let alpha = samples % 2 == 0 ? Int(source[pixel * samples + samples - 1]) : 255
      guard alpha > 0 else { continue }  // a transparent pixel's colour is not kept
      for sample in 0..<samples {
        // Colours under a small alpha lose precision in libtiff's premultiplication.
        let tolerance = sample == samples - 1 || alpha == 255 ? 0 : 255 / alpha + 1
        let difference = abs(Int(bytes[pixel * samples + sample]) - Int(source[pixel * samples + sample]))
        worst = max(worst, difference - tolerance)
      }
    }
    #expect(worst <= 0, "a sample differs by \(worst) beyond the premultiplication's rounding")
  }

  @Test("an associated (premultiplied) alpha comes out unpremultiplied, as libvips gives a contiguous TIFF")
  func associatedAlpha() throws {
    let stored: [UInt8] = Array([100, 50, 20, 128].repeated(16 * 16).joined())
    let decoded = try decode(
      HostileFiles.planarTiledTIFF(width: 16, height: 16, samples: 4, associatedAlpha: true, pixels: stored), "assoc.tif")
    let pixel = try decoded.image.pixel(x: 3, y: 5)
    #expect(zip(pixel, [199, 99, 39, 128]).allSatisfy { abs(Int($0) - $1) <= 1 }, "\(pixel)")
  }

  @Test("the orientation tag is applied like any TIFF's (6: turned a quarter)")
  func orientation() throws {
    let source = Self.pixels(width: 37, height: 23, samples: 3)
    let turned = try decode(
      HostileFiles.planarTiledTIFF(width: 37, height: 23, samples: 3, orientation: 6, pixels: source), "turned.tif")
    #expect(turned.width == 23 && turned.height == 37)
    // Orientation 6: the stored first row becomes the last column, top to bottom.
    #expect(try turned.image.pixel(x: 22, y: 0) == Array(source[0..<3]))
  }
}

extension Array {
  /// The array `count` times over, for building pixel data.
  fileprivate func repeated(_ count: Int) -> [[Element]] { [[Element]](repeating: self, count: count) }
}
