import { render } from 'preact';
import { html } from 'htm/preact';

render(html`<h1>Stratus console</h1>`, document.getElementById('app')!);
