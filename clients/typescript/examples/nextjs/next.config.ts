// next.config.ts: this folder is the app's root (the Tally checkout around it is no workspace of it).
import type { NextConfig } from "next";

const config: NextConfig = {
  turbopack: { root: process.cwd() },
  outputFileTracingRoot: process.cwd(),
};

export default config;
