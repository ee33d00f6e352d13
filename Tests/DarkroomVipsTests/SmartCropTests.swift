import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

@Suite("Smart crop on sequentially decoded images, and encoder side limits")
struct SmartCropTests {
  /// A 1200×800 image with a bright square, in `format` (TIFF built by hand: Darkroom does not
  /// encode it).
  static func source(_ format: ImageFormat) throws -> FetchedData {
    switch format {
    case .tiff:
      return HostileFiles.fetched(HostileFiles.gradientTIFF(width: 1200, height: 800), "photo.tiff")
    case .png:
      return try TestImages.fetched(.png(), width: 1200, height: 800, name: "photo")
    case .webp:
      return try TestImages.fetched(.webp(quality: 90), width: 1200, height: 800, name: "photo")
    default:
      return try TestImages.fetched(.jpeg(quality: 90), width: 1200, height: 800, name: "photo")
    }
  }

  static let formats: [ImageFormat] = [.jpeg, .png, .tiff, .webp]

  @Test("a smart crop stage works on every decodable format, fusion on and off", arguments: formats)
  func cropStage(_ format: ImageFormat) async throws {
    let input = try Self.source(format)
    for strategy in SmartCropStrategy.allCases {
      for fusion in [true, false] {
        let stages = [
          AnyStage(ImageDecoder()), AnyStage(Cropper(.smart(width: 300, height: 200, strategy: strategy))),
          AnyStage(ImageEncoder(.png())),
        ]
        let pipeline = try Pipeline<FetchedData, EncodedImage>(StageGraph(name: "smart", stages: stages, fusion: fusion))
        let output = try await pipeline.process(input)
        #expect(output.width == 300 && output.height == 200, "\(format) \(strategy) fusion=\(fusion)")
      }
    }
  }

  @Test("resize fill with a smart anchor works on every format, fusion on and off", arguments: formats)
  func fillSmart(_ format: ImageFormat) async throws {
    let input = try Self.source(format)
    for strategy in SmartCropStrategy.allCases {
      for fusion in [true, false] {
        let stages = [
          AnyStage(ImageDecoder()), AnyStage(Resizer(width: 200, height: 200, mode: .fill, crop: .smart(strategy))),
          AnyStage(ImageEncoder(.jpeg())),
        ]
        let pipeline = try Pipeline<FetchedData, EncodedImage>(StageGraph(name: "fill", stages: stages, fusion: fusion))
        let output = try await pipeline.process(input)
        #expect(output.width == 200 && output.height == 200, "\(format) \(strategy) fusion=\(fusion)")
        let back = try decodeBack(output)
        #expect(back.width == 200 && back.height == 200)
      }
    }
  }

  @Test("a JPEG side over 65535 pixels is a clear encodeFailed, before libvips")
  func jpegSideLimit() throws {
    // 200 × 70,000 (14 Mpx, inside maxPixels): decodes, but no JPEG can hold it.
    let tall = HostileFiles.png(width: 200, height: 70_000, rows: 70_000)
    let decoded = try ImageDecoder().decode(HostileFiles.fetched(tall, "tall.png"))
    #expect(decoded.height == 70_000)
    #expect {
      try ImageEncoder(.jpeg()).encode(decoded)
    } throws: { error in
      guard let error = error as? PipelineError else { return false }
      return error.code == .encodeFailed && error.message.contains("65535") && error.message.contains("resize")
    }
    #expect {
      try ImageEncoder(.webp()).encode(decoded)
    } throws: { error in
      (error as? PipelineError)?.code == .encodeFailed && (error as? PipelineError)?.message.contains("16383") == true
    }
    // PNG has no such limit.
    let png = try ImageEncoder(.png(compression: 1)).encode(decoded)
    #expect(png.height == 70_000)
  }

  @Test("an AVIF encode over maxAVIFPixels is refused before it starts (it could not be stopped)")
  func avifPixelLimit() throws {
    let image = try VipsImage.fromPixels([UInt8](repeating: 0, count: 4097 * 4096), width: 4097, height: 4096, bands: 1)
    let decoded = DecodedImage(
      source: ImageSource("big"), image: image, sourceFormat: .png, sourceWidth: 4097, sourceHeight: 4096)
    #expect {
      try ImageEncoder(.avif(effort: 0)).encode(decoded)
    } throws: { error in
      (error as? PipelineError)?.code == .encodeFailed && (error as? PipelineError)?.message.contains("AVIF") == true
    }
  }
}
