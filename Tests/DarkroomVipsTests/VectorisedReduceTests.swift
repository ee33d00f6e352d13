import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

/// Darkroom's vectorised horizontal reduce must give libvips' own bytes: the same geometry,
/// coefficient tables and rounding, only summed in SIMD registers.
@Suite("The vectorised horizontal reduce")
struct VectorisedReduceTests {
  /// A photo-like 8-bit image: a gradient with hard noise (0 and 255 beside each other push the
  /// Lanczos lobes past both ends, so clipping is exercised).
  static func busy(width: Int, height: Int, bands: Int) throws -> VipsImage {
    var pixels = TestImages.gradientPixels(width: width, height: height, bands: bands)
    for index in pixels.indices where index % 5 == 0 { pixels[index] = index % 10 == 0 ? 255 : 0 }
    for index in pixels.indices where index % 11 == 3 {
      pixels[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 13)
    }
    return try VipsImage.fromPixels(pixels, width: width, height: height, bands: bands)
  }

  /// The same bytes (a short message, not two arrays of thousands of bytes, when not).
  static func expectSame(_ a: [UInt8], _ b: [UInt8], _ what: String) {
    let difference = difference(a, b, what)
    #expect(difference == nil, "\(difference ?? "")")
  }

  /// How two byte arrays differ, or `nil` when they are the same: compared with `memcmp` (a
  /// generic comparison of whole images takes seconds in a debug build, on the tests' shared pool).
  static func difference(_ a: [UInt8], _ b: [UInt8], _ what: String) -> String? {
    let (same, differing) = a.withUnsafeBytes { x in
      b.withUnsafeBytes { y -> (Bool, Int) in
        if x.count == y.count, let p = x.baseAddress, let q = y.baseAddress, memcmp(p, q, x.count) == 0 { return (true, 0) }
        if x.isEmpty && y.isEmpty { return (true, 0) }
        var differing = 0
        for index in 0..<min(x.count, y.count) where x[index] != y[index] { differing += 1 }
        return (false, differing)
      }
    }
    return same ? nil : "\(what): \(a.count) and \(b.count) bytes, \(differing) differ"
  }

  static func expectSameAsLibvips(_ image: VipsImage, shrink: Double, kernel: ResizeKernel) throws {
    let problem = differenceFromLibvips(image, shrink: shrink, kernel: kernel)
    #expect(problem == nil, "\(problem ?? "")")
  }

  /// How Darkroom's horizontal reduce differs from libvips', or `nil` when it does not.
  static func differenceFromLibvips(_ image: VipsImage, shrink: Double, kernel: ResizeKernel) -> String? {
    let ours = Result { try image.reducedHorizontally(by: shrink, kernel: kernel).pixelBytes() }
    let libvips = Result { try image.reducedHorizontally(by: shrink, kernel: kernel, libvips: true).pixelBytes() }
    switch (ours, libvips) {
    case (.success(let a), .success(let b)):
      return difference(a, b, "\(image.width)×\(image.height)×\(image.bands) reduced by \(shrink) with \(kernel)")
    case (.failure, .failure):
      return nil  // both refuse (an image reduced to nothing)
    default:
      return "only one of the two failed for \(image.width) wide, shrink \(shrink): \(ours) \(libvips)"
    }
  }

  @Test("it takes 8-bit images of one and three bands with a Lanczos kernel, and nothing else")
  func takes() throws {
    #if arch(x86_64)
      #expect(try Self.busy(width: 8, height: 2, bands: 3).takesVectorisedReduce(kernel: .lanczos3))
      #expect(try Self.busy(width: 8, height: 2, bands: 1).takesVectorisedReduce(kernel: .lanczos2))
    #endif
    #expect(try !Self.busy(width: 8, height: 2, bands: 3).takesVectorisedReduce(kernel: .cubic))
    #expect(try !Self.busy(width: 8, height: 2, bands: 4).takesVectorisedReduce(kernel: .lanczos3))
    #expect(try !Self.busy(width: 8, height: 2, bands: 2).takesVectorisedReduce(kernel: .lanczos3))
    let sixteen = try ImageDecoder(autoRotate: false).decode(try corpusFile("pngsuite/basn0g16.png")).image
    #expect(sixteen.bands == 1 && !sixteen.takesVectorisedReduce(kernel: .lanczos3))
  }

  @Test(
    "every width, shrink and kernel gives libvips' bytes",
    arguments: [1, 3], [ResizeKernel.lanczos3, .lanczos2])
  func sameBytes(bands: Int, kernel: ResizeKernel) throws {
    for width in [1, 2, 3, 4, 5, 7, 16, 17, 64, 301, 1022] {
      let image = try Self.busy(width: width, height: 9, bands: bands).materialized()
      for shrink in [1.0, 1.0001, 1.33, 1.42, 1.9, 2.0, 2.5, 3.0, 3.99, 4.17, 7.3, 10.5, 33.3, 200] {
        try Self.expectSameAsLibvips(image, shrink: shrink, kernel: kernel)
      }
    }
  }

  @Test("real photos: a colour JPEG and a grey PNG reduce to libvips' bytes, and resize to vips_resize's")
  func realPhotos() async throws {
    let colour = try ImageDecoder(autoRotate: false).decode(
      try corpusFile("exif-orientation-examples/Landscape_1.jpg")
    ).image.materialized()
    let grey = try ImageDecoder(autoRotate: false).decode(try corpusFile("pngsuite/basn0g08.png")).image.materialized()
    #expect(colour.bands == 3 && grey.bands == 1)
    // Seconds of libvips work: on a thread of its own, not on the tests' shared pool.
    let problems = try await onOwnThread { () throws -> [String] in
      var problems: [String] = []
      for image in [colour, grey] {
        for shrink in [1.42, 2.27, 3.7, 5.9] {
          if let problem = Self.differenceFromLibvips(image, shrink: shrink, kernel: .lanczos3) { problems.append(problem) }
        }
        for (h, v) in [(0.704, 0.704), (0.3, 0.5), (0.5, 1.0), (0.9, 0.25), (0.11, 0.13)] {
          let ours = try image.resized(horizontal: h, vertical: v, kernel: .lanczos3).pixelBytes()
          let libvips = try image.resizedByLibvips(horizontal: h, vertical: v, kernel: .lanczos3).pixelBytes()
          let what = "\(image.width)×\(image.height)×\(image.bands) resized by \(h)×\(v)"
          if let problem = Self.difference(ours, libvips, what) { problems.append(problem) }
        }
      }
      return problems
    }
    #expect(problems.isEmpty, "\(problems)")
  }

  @Test("a streamed JPEG (read once, top to bottom) reduces as libvips reduces it")
  func streamed() throws {
    let input = try corpusFile("exif-orientation-examples/Portrait_1.jpg")
    let reference = try ImageDecoder.load(.jpeg, from: input.bytes, source: input.source)
      .resizedByLibvips(horizontal: 0.23, vertical: 0.23, kernel: .lanczos3).pixelBytes()
    let ours = try ImageDecoder.load(.jpeg, from: input.bytes, source: input.source)
      .resized(horizontal: 0.23, vertical: 0.23, kernel: .lanczos3).pixelBytes()
    Self.expectSame(ours, reference, "Portrait_1.jpg resized by 0.23")
  }
}
