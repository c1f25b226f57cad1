// The example has its code only with the package trait `Examples` (swift-prometheus): without
// it, main.swift's workload is compiled out (`#if Examples`) and the program says how to run it.
