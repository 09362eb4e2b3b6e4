// Live charts of the gateway's traffic, shared by the overview and the gateway page: a read
// repeated on a timer (usePoll), the traffic window it fills from `/v0/stats` (useTraffic,
// stats-window.ts) and a uPlot time chart (TimeChart). Timers stop and requests are aborted when
// the page goes away.
import { html } from 'htm/preact';
import type { VNode } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { StratusError, type StatsRow } from '@stratus/client';
import { messageOf, platform } from '../session.ts';
import { StatsWindow } from '../stats-window.ts';

/** How often the charts read `/v0/stats`, and how much they keep. */
export const TRAFFIC_INTERVAL_MS = 2000;
export const TRAFFIC_WINDOW_MS = 5 * 60_000;

export interface Polled<T> {
  data: T | undefined;
  error: string | null;
  /** Reads so far that answered; a new value re-renders even when `data` is the same object. */
  reads: number;
}

/** Errors that do not go away by asking again: demo mode (no mock route), a refusal. */
function final(err: unknown): boolean {
  return err instanceof StratusError && (err.code === 'demo' || err.status === 401 || err.status === 403);
}

/**
 * Runs `read` now and then every `intervalMs` after the previous read ended, until the component
 * unmounts (the timer is cleared and the read in flight aborted) or a read fails for good (demo
 * mode, 401, 403). `onData` sees each answer with the time it arrived.
 */
export function usePoll<T>(
  read: (signal: AbortSignal) => Promise<T>,
  intervalMs: number,
  onData?: (value: T, atMs: number) => void,
): Polled<T> {
  const [state, setState] = useState<Polled<T>>({ data: undefined, error: null, reads: 0 });
  // The latest callbacks, so a re-render does not restart the timer.
  const latest = useRef({ read, onData });
  latest.current = { read, onData };
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let controller: AbortController | undefined;
    const tick = async () => {
      controller = new AbortController();
      let again = true;
      try {
        const value = await latest.current.read(controller.signal);
        if (stopped) return;
        latest.current.onData?.(value, Date.now());
        setState((s) => ({ data: value, error: null, reads: s.reads + 1 }));
      } catch (err) {
        if (stopped) return;
        again = !final(err);
        setState((s) => ({ ...s, error: messageOf(err) }));
      }
      if (!stopped && again) timer = setTimeout(() => void tick(), intervalMs);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
      controller?.abort();
    };
  }, [intervalMs]);
  return state;
}

export interface Traffic {
  window: StatsWindow;
  /** The newest `/v0/stats` answer. */
  rows: StatsRow[] | undefined;
  error: string | null;
  reads: number;
}

/**
 * `/v0/stats` read every TRAFFIC_INTERVAL_MS into a window of the last TRAFFIC_WINDOW_MS. The
 * reads are requests too: the gateway counts each one (when it has finished), so this page adds
 * 1 / TRAFFIC_INTERVAL_MS to the rate of its own host.
 */
export function useTraffic(): Traffic {
  const window = useRef<StatsWindow | null>(null);
  window.current ??= new StatsWindow(
    Math.ceil(TRAFFIC_WINDOW_MS / TRAFFIC_INTERVAL_MS),
    // A tab in the background reads less often; a longer pause is a gap.
    3 * TRAFFIC_INTERVAL_MS,
  );
  const polled = usePoll(
    (signal) => platform().gateway.stats({ signal }),
    TRAFFIC_INTERVAL_MS,
    (rows, at) => window.current!.push(at, rows),
  );
  return { window: window.current, rows: polled.data, error: polled.error, reads: polled.reads };
}

/** The narrowest time span a chart shows, in seconds. */
const MIN_SPAN_S = 60;
const COLORS = ['#2f5bd3', '#d9480f', '#137333', '#9c36b5', '#c92a2a', '#0b7285', '#e67700', '#5c940d', '#862e9c'];

export interface ChartSeries {
  label: string;
  values: (number | null)[];
  color?: string;
}

/** A number for the legend and the table: two significant decimals at most. */
export function formatRate(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–';
  if (value === 0) return '0';
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

/**
 * A uPlot line chart over time: `times` in seconds since the epoch, one line per series (null is
 * a gap). The chart is made once per set of series labels and given new data on every render;
 * it follows its box's width and is destroyed with the component. Its box carries
 * `data-points` (how many points it plots), for tests and curious readers.
 */
export function TimeChart({
  times,
  series,
  unit,
  height = 220,
  testId,
}: {
  times: number[];
  series: ChartSeries[];
  /** The y axis' unit, for its label and the legend. */
  unit: string;
  height?: number;
  testId?: string;
}): VNode {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const labels = series.map((s) => s.label).join('\n');
  const data = (): uPlot.AlignedData => [times, ...series.map((s) => s.values)];

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const options: uPlot.Options = {
      width: Math.max(300, el.clientWidth),
      height,
      series: [
        {},
        ...series.map((s, i) => ({
          label: s.label,
          stroke: s.color ?? COLORS[i % COLORS.length],
          width: 2,
          points: { show: false },
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : `${formatRate(v)} ${unit}`),
        })),
      ],
      // One series is named by the chart's heading; the legend names several (and their values under the cursor).
      legend: { show: series.length > 1 },
      scales: {
        // At least a minute wide, so the first points do not fill the chart with sub-second ticks.
        x: {
          time: true,
          range: (_u, min, max) => {
            const end = Number.isFinite(max) ? max : Date.now() / 1000;
            return [Math.min(Number.isFinite(min) ? min : end, end - MIN_SPAN_S), end];
          },
        },
        // Rates and durations are never negative; an idle chart still shows a scale.
        y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] },
      },
      axes: [{}, { label: unit, values: (_u, splits) => splits.map((v) => formatRate(v)) }],
    };
    const chart = new uPlot(options, data(), el);
    plot.current = chart;
    el.dataset.points = String(times.length);
    const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(300, el.clientWidth), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      chart.destroy();
      plot.current = null;
    };
  }, [labels, unit, height]);

  useEffect(() => {
    plot.current?.setData(data());
    if (box.current) box.current.dataset.points = String(times.length);
  });

  return html`<div class="chart" ref=${box} data-testid=${testId}></div>`;
}
