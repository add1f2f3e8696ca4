import type { Component } from './types.js';
import { temporal } from './temporal.js';
import { postgres } from './postgres.js';
import { podman } from './podman.js';
import { image } from './image.js';
import { harness, python } from './python.js';
import { browser } from './browser.js';
import { tokenizers } from './tokenizers.js';
import { models } from './models.js';

/** In start order; `floe down` stops them in reverse. */
export const COMPONENTS: Component[] = [temporal, postgres, podman, image, python, harness, tokenizers, models, browser];
export type { Component, Health } from './types.js';
